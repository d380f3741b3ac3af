package ledger

import (
	"bytes"
	"errors"
	"fmt"
)

// MaxCapsuleSize bounds a capsule PutCapsule takes, whatever the store:
// Badger keeps no larger value in memory, and a capsule of this size
// already fills a JetStream server's default max_payload (1 MiB), past
// which the whole transaction fails with ErrTooBig.
const MaxCapsuleSize = 1 << 20

// Keys: 'e' lp(sub) lp(type) lp(id) -> the capsule of the aggregate's
// live record, or, while it has none, of its latest resolved record; and
// 'v' + the body of a resolved record's 'h' key -> that record's capsule
// once a later record of the aggregate was parked.
//
// A resolution leaves the capsule where it is: moving it would write its
// bytes again in the writer every resolved aggregate goes through (a
// bulk resume's). It moves to 'v' only when the aggregate parks again,
// which is rare, and goes when the sweep removes its record. A store of
// an earlier host, which moved it at the resolution, reads the same:
// Capsule looks under 'v' first. A host of that earlier version sharing a
// JetStream ledger takes such a capsule for a stale one when it parks the
// aggregate again, and drops it: that resolved record then has none.
func capsuleKey(sub, typ, id string) []byte { return key(kindCapsule, sub, typ, id) }

// resolvedCapsuleKey is the key of the capsule kept with the resolved
// record under hk (an 'h' key): the same body under 'v', so that the sweep
// finds it from the 'h' key alone.
func resolvedCapsuleKey(hk []byte) []byte {
	k := bytes.Clone(hk)
	k[0] = kindResolvedCapsule
	return k
}

// PutCapsule implements [ParkedRecords.PutCapsule].
func (t *kvTx) PutCapsule(subscription, aggregateType, aggregateID string, capsule []byte) error {
	const op = "PutCapsule"
	if err := t.checkWrite(op); err != nil {
		return err
	}
	if len(capsule) > MaxCapsuleSize {
		return fmt.Errorf("%w: %s: a capsule of %d bytes, the ledger keeps at most %d", ErrTooBig, op, len(capsule), MaxCapsuleSize)
	}
	if _, err := t.get(recordKey(subscription, aggregateType, aggregateID)); err != nil {
		if errors.Is(err, ErrNotFound) {
			return fmt.Errorf("ledger: %s %q %s/%s: no record: %w", op, subscription, aggregateType, aggregateID, ErrNotFound)
		}
		return t.fail(op, err)
	}
	ck := capsuleKey(subscription, aggregateType, aggregateID)
	if len(capsule) == 0 {
		return t.deleteIfPresent(op, ck)
	}
	return t.set(op, ck, bytes.Clone(capsule))
}

// deleteIfPresent deletes k if it holds a value: a delete of nothing would
// still be written (a tombstone, a message's op).
func (t *kvTx) deleteIfPresent(op string, k []byte) error {
	if _, err := t.get(k); errors.Is(err, ErrNotFound) {
		return nil
	} else if err != nil {
		return t.fail(op, err)
	}
	return t.delete(op, k)
}

// Capsule implements [ParkedRecords.Capsule].
func (t *kvTx) Capsule(subscription, aggregateType, aggregateID string) ([]byte, error) {
	const op = "Capsule"
	if err := t.checkRead(op); err != nil {
		return nil, err
	}
	v, err := t.capsule(subscription, aggregateType, aggregateID)
	if err != nil {
		return nil, fmt.Errorf("ledger: %s %q %s/%s: %w", op, subscription, aggregateType, aggregateID, err)
	}
	return v, nil
}

// capsule finds the capsule Capsule answers with: the live record's, or,
// with no live record, that of the aggregate's latest resolved one.
func (t *kvTx) capsule(sub, typ, id string) ([]byte, error) {
	_, err := t.get(recordKey(sub, typ, id))
	switch {
	case err == nil:
		return t.get(capsuleKey(sub, typ, id))
	case !errors.Is(err, ErrNotFound):
		return nil, err
	}
	hk := t.latestResolved(sub, typ, id)
	if hk == nil {
		return nil, ErrNotFound
	}
	// Moved there by a host that moved capsules at the resolution;
	// else it is still under the live key.
	v, err := t.get(resolvedCapsuleKey(hk))
	if errors.Is(err, ErrNotFound) {
		return t.get(capsuleKey(sub, typ, id))
	}
	return v, err
}

// latestResolved returns the 'h' key of the aggregate's latest resolved
// record, nil if none is kept. Resolved records sort by Seq within the
// aggregate; an aggregate has few of them (one per park, until swept).
func (t *kvTx) latestResolved(sub, typ, id string) []byte {
	hks := t.keysWithPrefix(key(kindResolved, sub, typ, id), -1)
	if len(hks) == 0 {
		return nil
	}
	return hks[len(hks)-1]
}

// keepCapsule runs when r is parked with no live record before it: a
// capsule under r's capsule key is its latest resolved record's, and
// moves to that record's 'v' key; with no resolved record kept (a host
// that knew no resolved records left it), it goes.
func (t *kvTx) keepCapsule(op string, r *Record) error {
	ck := capsuleKey(r.Subscription, r.AggregateType, r.AggregateID)
	v, err := t.get(ck)
	switch {
	case errors.Is(err, ErrNotFound):
		return nil
	case err != nil:
		return t.fail(op, err)
	}
	if hk := t.latestResolved(r.Subscription, r.AggregateType, r.AggregateID); hk != nil {
		if err := t.set(op, resolvedCapsuleKey(hk), v); err != nil {
			return err
		}
	}
	return t.delete(op, ck)
}

// sweepCapsules deletes the capsule of the resolved record under hk (an
// 'h' key the sweep removes): under 'v', or under the live key when hk is
// the aggregate's latest record and no live record holds that key.
func (t *kvTx) sweepCapsules(op string, hk []byte) error {
	if err := t.delete(op, resolvedCapsuleKey(hk)); err != nil {
		return err
	}
	if len(hk) < 9 {
		return nil
	}
	parts, err := splitLP(hk[1 : len(hk)-8])
	if err != nil || len(parts) != 3 {
		return nil // not an 'h' key of this layout: nothing of it under 'e'
	}
	sub, typ, id := parts[0], parts[1], parts[2]
	if _, err := t.get(recordKey(sub, typ, id)); err == nil {
		return nil
	} else if !errors.Is(err, ErrNotFound) {
		return t.fail(op, err)
	}
	it := t.txn.Iterate(hk[:len(hk)-8], false)
	it.Seek(append(bytes.Clone(hk), 0))
	later := it.Valid()
	it.Close()
	if later {
		return nil
	}
	return t.deleteIfPresent(op, capsuleKey(sub, typ, id))
}
