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

// Keys: 'e' lp(sub) lp(type) lp(id) -> the live record's capsule, and
// 'v' + the body of a resolved record's 'h' key -> that record's capsule.
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
	// Resolved records sort by Seq within the aggregate: the last is the
	// latest. An aggregate has few of them (one per park, until swept).
	hks := t.keysWithPrefix(key(kindResolved, sub, typ, id), -1)
	if len(hks) == 0 {
		return nil, ErrNotFound
	}
	return t.get(resolvedCapsuleKey(hks[len(hks)-1]))
}

// moveCapsule moves the aggregate's live capsule (if it has one) to its
// resolved record under hk; DeleteParked calls it.
func (t *kvTx) moveCapsule(op string, sub, typ, id string, hk []byte) error {
	ck := capsuleKey(sub, typ, id)
	v, err := t.get(ck)
	switch {
	case errors.Is(err, ErrNotFound):
		return nil
	case err != nil:
		return t.fail(op, err)
	}
	if err := t.set(op, resolvedCapsuleKey(hk), v); err != nil {
		return err
	}
	return t.delete(op, ck)
}

// dropStaleCapsule deletes what is under r's capsule key when r is parked
// anew: a capsule there belongs to an earlier record that a host without
// capsules resolved, not to r.
func (t *kvTx) dropStaleCapsule(op string, r *Record) error {
	return t.deleteIfPresent(op, capsuleKey(r.Subscription, r.AggregateType, r.AggregateID))
}
