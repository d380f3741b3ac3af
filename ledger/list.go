package ledger

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
)

func limitOr(limit int) int {
	if limit <= 0 {
		return DefaultLimit
	}
	return limit
}

// ListParked implements [ParkedRecords.ListParked].
// The cursor is the URL-safe base64 of the last record's key.
func (t *KVTx) ListParked(f Filter) ([]*Record, string, error) {
	if err := t.checkRead("ListParked"); err != nil {
		return nil, "", err
	}
	if f.State != "" && !validState(f.State) {
		return nil, "", fmt.Errorf("%w: ListParked: unknown state %q", ErrInvalid, f.State)
	}
	limit := limitOr(f.Limit)
	prefix := []byte{kindRecord}
	if f.Subscription != "" {
		prefix = key(kindRecord, f.Subscription)
	}
	start := prefix
	if f.After != "" {
		after, err := base64.RawURLEncoding.DecodeString(f.After)
		if err != nil {
			return nil, "", fmt.Errorf("%w: ListParked: bad cursor: %v", ErrInvalid, err)
		}
		if _, _, _, err := parseRecordKey(after); err != nil {
			return nil, "", fmt.Errorf("%w: ListParked: bad cursor", ErrInvalid)
		}
		if next := append(after, 0); bytes.Compare(next, start) > 0 { // the first key after it
			start = next
		}
	}

	var (
		out     []*Record
		lastKey []byte
		more    bool
	)
	it := t.txn.Iterate(prefix, true)
	defer it.Close()
	for it.Seek(start); it.Valid(); it.Next() {
		_, aggType, _, err := parseRecordKey(it.Key())
		if err != nil {
			return nil, "", fmt.Errorf("ledger: ListParked: %w", err)
		}
		if f.AggregateType != "" && aggType != f.AggregateType {
			continue
		}
		v, err := it.Value()
		if err != nil {
			return nil, "", fmt.Errorf("ledger: ListParked: %w", err)
		}
		r := new(Record)
		if err := json.Unmarshal(v, r); err != nil {
			return nil, "", fmt.Errorf("ledger: ListParked: corrupt record %q: %w", it.Key(), err)
		}
		if !f.Matches(r) {
			continue
		}
		if len(out) == limit {
			more = true
			break
		}
		out = append(out, r)
		lastKey = append(lastKey[:0], it.Key()...)
	}
	if !more {
		return out, "", nil
	}
	return out, base64.RawURLEncoding.EncodeToString(lastKey), nil
}
