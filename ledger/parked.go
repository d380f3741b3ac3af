package ledger

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// ParkedRecords is the failure ledger proper: one Record per parked
// aggregate of a subscription, counted by state, with the capsule of its
// failed attempt if one was recorded, and, once an aggregate is resolved,
// its record (and capsule) kept as Resolved until the retention sweeps it.
type ParkedRecords interface {
	// Parked returns the record of one parked aggregate, ErrNotFound if
	// the aggregate is not parked for the subscription.
	Parked(subscription, aggregateType, aggregateID string) (*Record, error)
	// PutParked stores r, replacing the record of the same subscription
	// and aggregate, and counts it under its state (ErrInvalid for a nil
	// record, one without subscription, aggregate type or id, or of an
	// unknown State).
	PutParked(r *Record) error
	// DeleteParked removes a record, its aggregate being resolved, and
	// keeps it among the resolved records (ListResolved) until the
	// retention sweeps it; ErrNotFound if the aggregate is not parked for
	// the subscription.
	DeleteParked(subscription, aggregateType, aggregateID string) error
	// ListParked returns up to f.Limit (DefaultLimit when 0 or less)
	// records matching f in key order, and the cursor of the next page:
	// "" when no matching record follows. The cursor is opaque; one that
	// ListParked did not return, or an unknown State, is ErrInvalid.
	// Records added or removed between pages are seen or not, but a record
	// is never returned twice.
	ListParked(f Filter) ([]*Record, string, error)
	// CountParked counts a subscription's records by state; states without
	// records are absent from the map.
	CountParked(subscription string) (map[State]int, error)
	// CountMatching counts the records matching f exactly (its After and
	// Limit aside): from counters kept with the records when f names at
	// most a subscription, a state and a class or an aggregate type, else
	// by reading the index entries of the narrowest of its conditions.
	CountMatching(f Filter) (int, error)
	// GroupsParked returns up to f.Limit (DefaultLimit when 0 or less)
	// failure groups passing f, the biggest first, with their counts kept
	// beside the records, and the cursor of the next page ("" at the
	// end). The cursor is a position in that order: a group that grows
	// or shrinks between pages may move past it. A bad cursor or an
	// unknown State is ErrInvalid.
	GroupsParked(f GroupFilter) ([]Group, string, error)
	// PutProof keeps p, replacing the proof of the same subscription, group
	// and sha256, and adds handled to the aggregates it handled (a large
	// proof is put in several transactions, a page of handled each).
	// ErrInvalid without subscription, group or sha256.
	PutProof(p Proof, handled []ProofKey) error
	// Proof returns the proof of a candidate's sha256 on a group,
	// ErrNotFound if none was put.
	Proof(subscription, group, sha256 string) (*Proof, error)
	// CountGroups counts a subscription's failure groups: one key read a
	// group.
	CountGroups(subscription string) (int, error)
	// OldestParked returns the earliest first failure of a subscription's
	// records that are retrying or waiting, from an index; false when
	// there is none.
	OldestParked(subscription string) (time.Time, bool, error)
	// ListParkedKeys returns up to limit (DefaultLimit when 0 or less) of
	// a subscription's parked aggregates, in key order, with what the
	// engine needs to hold them at its start, read from the index without
	// their records; and the cursor of the next page ("" at the end).
	ListParkedKeys(subscription, after string, limit int) ([]ParkedKey, string, error)

	// ListResolved returns up to f.Limit (DefaultLimit when 0 or less) of
	// the records DeleteParked kept, in key order (subscription, aggregate
	// type, id, then oldest first), and the cursor of the next page ("" at
	// the end). An aggregate type without a subscription, an id without a
	// type, or a cursor ListResolved did not return is ErrInvalid.
	ListResolved(f ResolvedFilter) ([]*Resolved, string, error)
	// PutCapsule stores capsule, the recording of an attempt at the
	// parked aggregate (an encoded abi.Capsule; the ledger keeps the bytes
	// as they are), replacing the record's capsule; an empty capsule
	// removes it. ErrNotFound if the aggregate is not parked for the
	// subscription, ErrTooBig for a capsule past MaxCapsuleSize (neither
	// fails the transaction). On JetStream the transaction's message must also
	// fit the server's max_payload, else its commit fails with ErrTooBig.
	// A capsule moves with its record when DeleteParked
	// resolves it, and goes when SweepResolved removes that.
	PutCapsule(subscription, aggregateType, aggregateID string, capsule []byte) error
	// Capsule returns the capsule of the aggregate's record: of the parked
	// record while there is one, else of its most recently resolved record
	// still kept; ErrNotFound if that record has none, or there is no
	// record.
	Capsule(subscription, aggregateType, aggregateID string) ([]byte, error)

	// SweepResolved removes up to limit (DefaultLimit when 0 or less) of
	// the records resolved before before, oldest first, with their
	// capsules, and reports
	// whether more such remain. Call it in transactions of its own until
	// it reports none.
	SweepResolved(before time.Time, limit int) (more bool, err error)
}

// ParkedKey is a parked aggregate as the index knows it.
type ParkedKey struct {
	AggregateType, AggregateID string
	State                      State
	NextRetry                  time.Time // zero unless State is StateRetrying
	// Unrecoverable: the failure that parked it was taken for
	// unrecoverable (ErrorInfo.Class, or Kind in older records).
	Unrecoverable bool
}

// validState reports whether s is one of the States.
func validState(s State) bool {
	return s == StateRetrying || s == StateWaiting || s == StateResuming
}

func validateRecord(r *Record) error {
	switch {
	case r == nil:
		return fmt.Errorf("%w: PutParked: nil record", ErrInvalid)
	case r.Subscription == "":
		return fmt.Errorf("%w: PutParked: subscription is empty", ErrInvalid)
	case r.AggregateType == "":
		return fmt.Errorf("%w: PutParked: aggregate type is empty", ErrInvalid)
	case r.AggregateID == "":
		return fmt.Errorf("%w: PutParked: aggregate id is empty", ErrInvalid)
	case !validState(r.State):
		return fmt.Errorf("%w: PutParked: unknown state %q", ErrInvalid, r.State)
	}
	return nil
}

// Parked implements [ParkedRecords.Parked].
func (t *kvTx) Parked(subscription, aggregateType, aggregateID string) (*Record, error) {
	if err := t.checkRead("Parked"); err != nil {
		return nil, err
	}
	r, err := t.record(recordKey(subscription, aggregateType, aggregateID))
	if err != nil {
		return nil, fmt.Errorf("ledger: parked %q %s/%s: %w", subscription, aggregateType, aggregateID, err)
	}
	return r, nil
}

// record reads and decodes the record under k.
func (t *kvTx) record(k []byte) (*Record, error) {
	v, err := t.get(k)
	if err != nil {
		return nil, err
	}
	r := new(Record)
	if err := json.Unmarshal(v, r); err != nil {
		return nil, fmt.Errorf("corrupt record: %w", err)
	}
	return r, nil
}

// PutParked implements [ParkedRecords.PutParked].
// The counts and the index entries (index.go) change with the record.
func (t *kvTx) PutParked(r *Record) error {
	const op = "PutParked"
	if err := t.checkWrite(op); err != nil {
		return err
	}
	if err := validateRecord(r); err != nil {
		return err
	}
	k := recordKey(r.Subscription, r.AggregateType, r.AggregateID)
	old, found, indexed, err := t.stored(r.Subscription, r.AggregateType, r.AggregateID)
	if err != nil {
		return fmt.Errorf("ledger: %s: %w", op, err)
	}
	v, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInvalid, op, err)
	}
	if err := t.set(op, k, v); err != nil {
		return err
	}
	if found && old.state != r.State {
		if err := t.addCount(op, r.Subscription, old.state, -1); err != nil {
			return err
		}
	} else if !found {
		if err := t.keepCapsule(op, r); err != nil {
			return err
		}
	}
	s := summarize(r)
	if indexed {
		err = t.reindex(op, r.Subscription, r.AggregateType, r.AggregateID, old, s)
	} else {
		err = t.index(op, r.Subscription, r.AggregateType, r.AggregateID, s)
	}
	if err != nil {
		return err
	}
	if err := t.joinGroup(op, r, s, !indexed || old.group != s.group, true); err != nil {
		return err
	}
	if indexed && old.group != s.group {
		if err := t.leaveGroup(op, r.Subscription, old); err != nil {
			return err
		}
	}
	if found && old.state == r.State {
		return nil
	}
	return t.addCount(op, r.Subscription, r.State, +1)
}

// DeleteParked implements [ParkedRecords.DeleteParked].
func (t *kvTx) DeleteParked(subscription, aggregateType, aggregateID string) error {
	const op = "DeleteParked"
	if err := t.checkWrite(op); err != nil {
		return err
	}
	k := recordKey(subscription, aggregateType, aggregateID)
	old, found, indexed, err := t.stored(subscription, aggregateType, aggregateID)
	if err != nil {
		return fmt.Errorf("ledger: %s: %w", op, err)
	}
	if !found {
		return fmt.Errorf("ledger: %s %q %s/%s: %w", op, subscription, aggregateType, aggregateID, ErrNotFound)
	}
	v, err := t.get(k)
	if err != nil {
		return t.fail(op, err)
	}
	// The capsule stays under its key (capsule.go).
	if err := t.keepResolved(op, subscription, aggregateType, aggregateID, v); err != nil {
		return err
	}
	if err := t.delete(op, k); err != nil {
		return err
	}
	if indexed {
		if err := t.unindex(op, subscription, aggregateType, aggregateID, old); err != nil {
			return err
		}
		if err := t.leaveGroup(op, subscription, old); err != nil {
			return err
		}
	}
	return t.addCount(op, subscription, old.state, -1)
}

// stored returns the summary of the stored record of an aggregate, if
// any, and whether it is indexed: a record written before the index (and
// not yet indexed by BuildIndex) is summarised from its JSON.
func (t *kvTx) stored(sub, aggType, aggID string) (s summary, found, indexed bool, err error) {
	if s, found, err = t.summaryOf(sub, aggType, aggID); err != nil || found {
		return s, found, found, err
	}
	r, err := t.record(recordKey(sub, aggType, aggID))
	if errors.Is(err, ErrNotFound) {
		return summary{}, false, false, nil
	}
	if err != nil {
		return summary{}, false, false, err
	}
	return summarize(r), true, false, nil
}

// addCount adds delta to the count of a subscription's records in state,
// deleting the count when it reaches 0.
func (t *kvTx) addCount(op, subscription string, state State, delta int) error {
	k := key(kindCount, subscription, string(state))
	n, _, err := t.getUint64(k)
	if err != nil {
		return t.fail(op, err)
	}
	switch next := int64(n) + int64(delta); {
	case next < 0:
		return t.fail(op, fmt.Errorf("count of %q in %s would go below 0", subscription, state))
	case next == 0:
		return t.delete(op, k)
	default:
		return t.set(op, k, u64(uint64(next)))
	}
}

// CountParked implements [ParkedRecords.CountParked].
func (t *kvTx) CountParked(subscription string) (map[State]int, error) {
	if err := t.checkRead("CountParked"); err != nil {
		return nil, err
	}
	counts := map[State]int{}
	for _, s := range []State{StateRetrying, StateWaiting, StateResuming} {
		n, ok, err := t.getUint64(key(kindCount, subscription, string(s)))
		if err != nil {
			return nil, fmt.Errorf("ledger: CountParked %q: %w", subscription, err)
		}
		if ok && n > 0 {
			counts[s] = int(n)
		}
	}
	return counts, nil
}
