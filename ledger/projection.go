package ledger

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// ReadModels keeps each projection's read model: a key/value namespace per
// subscription, with the last event of each aggregate applied to it, so a
// projection's writes and its progress commit together and an event is
// applied once.
type ReadModels interface {
	// ProjectionGet returns a copy of the value under key in the
	// subscription's read model, ErrNotFound if there is none.
	ProjectionGet(subscription, key string) ([]byte, error)
	// ProjectionPut stores value under key in the subscription's read
	// model, replacing any; nil is stored as an empty value. Neither the
	// subscription nor the key may be empty.
	ProjectionPut(subscription, key string, value []byte) error
	// ProjectionDelete removes key from the subscription's read model;
	// deleting a missing key is no error.
	ProjectionDelete(subscription, key string) error
	// ProjectionList returns up to limit (DefaultLimit when 0 or less)
	// entries of the subscription's read model whose keys start with
	// prefix and sort after the key after (empty: from the first), in key
	// (byte) order, and the key to pass as after for the next page ("" at
	// the end).
	ProjectionList(subscription, prefix, after string, limit int) ([]ProjectionEntry, string, error)
	// ClearProjection empties the subscription's read model and forgets
	// its applied markers, atomically with the rest of the transaction
	// however large the read model is: the namespace moves to a new
	// generation at once, and the old one's keys are removed later by
	// SweepProjections.
	ClearProjection(subscription string) error
	// SweepProjections removes up to limit (DefaultLimit when 0 or less)
	// keys of read models that ClearProjection retired, and reports
	// whether any remain. Call it in transactions of its own until it
	// reports none, so that no transaction grows past the store's limit.
	SweepProjections(limit int) (more bool, err error)
	// Applied returns the last event (commit version and index within it)
	// of the aggregate applied to the subscription's read model; ok is
	// false when none was.
	Applied(subscription, aggregateType, aggregateID string) (version uint64, index uint32, ok bool, err error)
	// SetApplied records the last event of the aggregate applied to the
	// subscription's read model, replacing any. Subscription, aggregate
	// type and id must not be empty.
	SetApplied(subscription, aggregateType, aggregateID string, version uint64, index uint32) error
}

// ProjectionEntry is one key and value of a read model.
type ProjectionEntry struct {
	Key   string
	Value []byte
}

// generation returns the current generation of the subscription's read
// model (0 when it was never cleared).
func (t *kvTx) generation(subscription string) (uint64, error) {
	g, _, err := t.getUint64(key(kindGeneration, subscription))
	return g, err
}

// projectionPrefix is the prefix of every key of one generation of a read
// model.
func projectionPrefix(subscription string, gen uint64) []byte {
	return binary.BigEndian.AppendUint64(key(kindProjection, subscription), gen)
}

func appliedPrefix(subscription string, gen uint64) []byte {
	return binary.BigEndian.AppendUint64(key(kindApplied, subscription), gen)
}

func appliedKey(subscription string, gen uint64, aggregateType, aggregateID string) []byte {
	b := appliedPrefix(subscription, gen)
	b = appendLP(b, aggregateType)
	return appendLP(b, aggregateID)
}

// projectionKey returns the store key of key in the current generation.
func (t *kvTx) projectionKey(subscription, k string) ([]byte, error) {
	gen, err := t.generation(subscription)
	if err != nil {
		return nil, err
	}
	return append(projectionPrefix(subscription, gen), k...), nil
}

// ProjectionGet implements [ReadModels.ProjectionGet].
func (t *kvTx) ProjectionGet(subscription, k string) ([]byte, error) {
	if err := t.checkRead("ProjectionGet"); err != nil {
		return nil, err
	}
	sk, err := t.projectionKey(subscription, k)
	if err != nil {
		return nil, fmt.Errorf("ledger: projection %q: %w", subscription, err)
	}
	v, err := t.get(sk)
	if err != nil {
		return nil, fmt.Errorf("ledger: projection %q key %q: %w", subscription, k, err)
	}
	return v, nil
}

// ProjectionPut implements [ReadModels.ProjectionPut].
func (t *kvTx) ProjectionPut(subscription, k string, value []byte) error {
	if err := t.checkWrite("ProjectionPut"); err != nil {
		return err
	}
	if subscription == "" || k == "" {
		return fmt.Errorf("%w: ProjectionPut: subscription or key is empty", ErrInvalid)
	}
	sk, err := t.projectionKey(subscription, k)
	if err != nil {
		return t.fail("ProjectionPut", err)
	}
	return t.set("ProjectionPut", sk, append([]byte{}, value...))
}

// ProjectionDelete implements [ReadModels.ProjectionDelete].
func (t *kvTx) ProjectionDelete(subscription, k string) error {
	if err := t.checkWrite("ProjectionDelete"); err != nil {
		return err
	}
	if subscription == "" || k == "" {
		return fmt.Errorf("%w: ProjectionDelete: subscription or key is empty", ErrInvalid)
	}
	sk, err := t.projectionKey(subscription, k)
	if err != nil {
		return t.fail("ProjectionDelete", err)
	}
	return t.delete("ProjectionDelete", sk)
}

// ProjectionList implements [ReadModels.ProjectionList].
func (t *kvTx) ProjectionList(subscription, prefix, after string, limit int) ([]ProjectionEntry, string, error) {
	if err := t.checkRead("ProjectionList"); err != nil {
		return nil, "", err
	}
	limit = limitOr(limit)
	gen, err := t.generation(subscription)
	if err != nil {
		return nil, "", fmt.Errorf("ledger: ProjectionList %q: %w", subscription, err)
	}
	base := projectionPrefix(subscription, gen)
	scan := append(bytes.Clone(base), prefix...)
	start := scan
	if after != "" {
		// The first key after it.
		if next := append(append(bytes.Clone(base), after...), 0); bytes.Compare(next, start) > 0 {
			start = next
		}
	}
	var out []ProjectionEntry
	it := t.txn.Iterate(scan, true)
	defer it.Close()
	for it.Seek(start); it.Valid(); it.Next() {
		if len(out) == limit {
			return out, out[len(out)-1].Key, nil
		}
		v, err := it.Value()
		if err != nil {
			return nil, "", fmt.Errorf("ledger: ProjectionList %q: %w", subscription, err)
		}
		out = append(out, ProjectionEntry{Key: string(it.Key()[len(base):]), Value: v})
	}
	return out, "", nil
}

// ClearProjection implements [ReadModels.ClearProjection].
func (t *kvTx) ClearProjection(subscription string) error {
	if err := t.checkWrite("ClearProjection"); err != nil {
		return err
	}
	if subscription == "" {
		return fmt.Errorf("%w: ClearProjection: subscription is empty", ErrInvalid)
	}
	gen, err := t.generation(subscription)
	if err != nil {
		return t.fail("ClearProjection", err)
	}
	retired := binary.BigEndian.AppendUint64(key(kindRetired, subscription), gen)
	if err := t.set("ClearProjection", retired, []byte{}); err != nil {
		return err
	}
	return t.set("ClearProjection", key(kindGeneration, subscription), u64(gen+1))
}

// SweepProjections implements [ReadModels.SweepProjections].
func (t *kvTx) SweepProjections(limit int) (bool, error) {
	if err := t.checkWrite("SweepProjections"); err != nil {
		return false, err
	}
	limit = limitOr(limit)
	retired := t.keysWithPrefix([]byte{kindRetired}, -1)
	budget := limit
	for _, rk := range retired {
		// The retired key is 'z' lp(subscription) gen(8): the data and
		// markers of that generation share its body.
		body := rk[1:]
		if len(body) < 8 {
			return false, t.fail("SweepProjections", errBadKey)
		}
		done := true
		for _, kind := range []byte{kindProjection, kindApplied} {
			prefix := append([]byte{kind}, body...)
			keys := t.keysWithPrefix(prefix, budget+1)
			if len(keys) > budget {
				keys, done = keys[:budget], false
			}
			for _, k := range keys {
				if err := t.delete("SweepProjections", k); err != nil {
					return false, err
				}
			}
			budget -= len(keys)
		}
		if !done {
			return true, nil
		}
		if budget == 0 {
			// Anything of it left is found by the next sweep.
			return true, nil
		}
		if err := t.delete("SweepProjections", rk); err != nil {
			return false, err
		}
		budget--
	}
	return false, nil
}

// Applied implements [ReadModels.Applied].
func (t *kvTx) Applied(subscription, aggregateType, aggregateID string) (uint64, uint32, bool, error) {
	if err := t.checkRead("Applied"); err != nil {
		return 0, 0, false, err
	}
	gen, err := t.generation(subscription)
	if err != nil {
		return 0, 0, false, fmt.Errorf("ledger: applied of %q: %w", subscription, err)
	}
	v, err := t.get(appliedKey(subscription, gen, aggregateType, aggregateID))
	if errors.Is(err, ErrNotFound) {
		return 0, 0, false, nil
	}
	if err != nil {
		return 0, 0, false, fmt.Errorf("ledger: applied of %q: %w", subscription, err)
	}
	if len(v) != 12 {
		return 0, 0, false, fmt.Errorf("ledger: applied of %q: corrupt marker", subscription)
	}
	return binary.BigEndian.Uint64(v), binary.BigEndian.Uint32(v[8:]), true, nil
}

// SetApplied implements [ReadModels.SetApplied].
func (t *kvTx) SetApplied(subscription, aggregateType, aggregateID string, version uint64, index uint32) error {
	if err := t.checkWrite("SetApplied"); err != nil {
		return err
	}
	if subscription == "" || aggregateType == "" || aggregateID == "" {
		return fmt.Errorf("%w: SetApplied: subscription, aggregate type or id is empty", ErrInvalid)
	}
	gen, err := t.generation(subscription)
	if err != nil {
		return t.fail("SetApplied", err)
	}
	v := binary.BigEndian.AppendUint32(u64(version), index)
	return t.set("SetApplied", appliedKey(subscription, gen, aggregateType, aggregateID), v)
}
