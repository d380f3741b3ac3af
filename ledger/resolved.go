package ledger

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// Resolved is a parked record kept after its aggregate was resumed or
// skipped and its held events were replayed: its error, attempts and
// history (who resumed or skipped it, and why) stay queryable until the
// retention sweeps them (SweepResolved).
type Resolved struct {
	Record
	// Seq numbers resolutions, increasing: an aggregate parked and
	// resolved again keeps each of its records.
	Seq uint64 `json:"seq"`
	// ResolvedAt is the time of the record's last history entry: the
	// resume, skip or retry that resolved it.
	ResolvedAt time.Time `json:"resolvedAt"`
}

// ResolvedFilter selects resolved records for ListResolved.
type ResolvedFilter struct {
	Subscription  string // empty: all
	AggregateType string // empty: all (needs Subscription)
	AggregateID   string // empty: all (needs AggregateType)
	After         string // cursor from a previous page; empty: from the start
	Limit         int    // 0: DefaultLimit
}

// Keys: 'h' lp(sub) lp(type) lp(id) seq(8) -> Resolved as JSON, and, for the
// sweep in time order, 'w' resolvedAt(8, unix nanos) seq(8) -> the 'h' key.
func resolvedKey(sub, typ, id string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(key(kindResolved, sub, typ, id), seq)
}

func resolvedTimeKey(at time.Time, seq uint64) []byte {
	k := binary.BigEndian.AppendUint64([]byte{kindResolvedTime}, uint64(at.UnixNano()))
	return binary.BigEndian.AppendUint64(k, seq)
}

func resolvedSeqKey() []byte { return []byte("xresolved-seq") }

// keepResolved keeps the record of (sub, typ, id) stored as v (its JSON)
// among the resolved ones; DeleteParked calls it. The resolved record's
// JSON is v with its seq and resolvedAt added at its end: decoding the
// whole record and encoding it again cost the ledger's writer as much as
// the rest of the resolution (a bulk resume's); only what resolvedAt is
// taken from is decoded.
func (t *kvTx) keepResolved(op, sub, typ, id string, v []byte) error {
	var times struct {
		LastFailure time.Time `json:"lastFailure"`
		History     []struct {
			Time time.Time `json:"time"`
		} `json:"history"`
	}
	body := bytes.TrimRight(v, " \t\r\n")
	if err := json.Unmarshal(body, &times); err != nil || len(body) < 2 || body[0] != '{' {
		return t.fail(op, fmt.Errorf("corrupt record: %v", err))
	}
	last, _, err := t.getUint64(resolvedSeqKey())
	if err != nil {
		return t.fail(op, err)
	}
	seq, at := last+1, times.LastFailure
	if n := len(times.History); n > 0 {
		at = times.History[n-1].Time
	}
	atJSON, err := at.MarshalJSON()
	if err != nil {
		return t.fail(op, err)
	}
	b := make([]byte, 0, len(body)+len(atJSON)+48)
	b = append(b, body[:len(body)-1]...)
	if len(bytes.TrimSpace(body[1:len(body)-1])) > 0 {
		b = append(b, ',')
	}
	b = append(b, `"seq":`...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, `,"resolvedAt":`...)
	b = append(append(b, atJSON...), '}')
	hk := resolvedKey(sub, typ, id, seq)
	if err := t.set(op, hk, b); err != nil {
		return err
	}
	if err := t.set(op, resolvedTimeKey(at, seq), hk); err != nil {
		return err
	}
	return t.set(op, resolvedSeqKey(), u64(seq))
}

// ListResolved implements [ParkedRecords.ListResolved].
// The cursor is the URL-safe base64 of the last record's key.
func (t *kvTx) ListResolved(f ResolvedFilter) ([]*Resolved, string, error) {
	if err := t.checkRead("ListResolved"); err != nil {
		return nil, "", err
	}
	var parts []string
	switch {
	case f.AggregateID != "" && (f.AggregateType == "" || f.Subscription == ""),
		f.AggregateType != "" && f.Subscription == "":
		return nil, "", fmt.Errorf("%w: ListResolved: an aggregate type needs a subscription, an id a type", ErrInvalid)
	case f.AggregateID != "":
		parts = []string{f.Subscription, f.AggregateType, f.AggregateID}
	case f.AggregateType != "":
		parts = []string{f.Subscription, f.AggregateType}
	case f.Subscription != "":
		parts = []string{f.Subscription}
	}
	prefix := key(kindResolved, parts...)
	start := prefix
	if f.After != "" {
		after, err := base64.RawURLEncoding.DecodeString(f.After)
		if err != nil || len(after) == 0 || after[0] != kindResolved {
			return nil, "", fmt.Errorf("%w: ListResolved: bad cursor", ErrInvalid)
		}
		if next := append(after, 0); bytes.Compare(next, start) > 0 {
			start = next
		}
	}
	limit := limitOr(f.Limit)
	var out []*Resolved
	var lastKey []byte
	more := false
	err := t.scan(prefix, start, func(k, v []byte) (bool, error) {
		if len(out) == limit {
			more = true
			return false, nil
		}
		r := new(Resolved)
		if err := json.Unmarshal(v, r); err != nil {
			return false, fmt.Errorf("corrupt resolved record %q: %w", k, err)
		}
		out = append(out, r)
		lastKey = append(lastKey[:0], k...)
		return true, nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("ledger: ListResolved: %w", err)
	}
	if !more {
		return out, "", nil
	}
	return out, base64.RawURLEncoding.EncodeToString(lastKey), nil
}

// SweepResolved implements [ParkedRecords.SweepResolved].
func (t *kvTx) SweepResolved(before time.Time, limit int) (bool, error) {
	const op = "SweepResolved"
	if err := t.checkWrite(op); err != nil {
		return false, err
	}
	limit = limitOr(limit)
	end := resolvedTimeKey(before, 0)
	var idx, recs [][]byte
	more := false
	err := t.scan([]byte{kindResolvedTime}, nil, func(k, v []byte) (bool, error) {
		if bytes.Compare(k, end) >= 0 {
			return false, nil
		}
		if len(idx) == limit {
			more = true
			return false, nil
		}
		idx = append(idx, append([]byte(nil), k...))
		recs = append(recs, append([]byte(nil), v...))
		return true, nil
	})
	if err != nil {
		return false, t.fail(op, err)
	}
	for i := range idx {
		if err := t.delete(op, recs[i]); err != nil {
			return false, err
		}
		if len(recs[i]) > 0 && recs[i][0] == kindResolved {
			if err := t.sweepCapsules(op, recs[i]); err != nil {
				return false, err
			}
		}
		if err := t.delete(op, idx[i]); err != nil {
			return false, err
		}
	}
	return more, nil
}
