package ledger

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strings"
	"time"
)

func limitOr(limit int) int {
	if limit <= 0 {
		return DefaultLimit
	}
	return limit
}

// ListParked implements [ParkedRecords.ListParked]: it walks the index
// path the filter narrows most (index.go), checks the other conditions on
// the entries' summaries and reads the records of the matches. The cursor
// is the URL-safe base64 of the last key looked at: a record key on the
// path of every record (as Cursor makes), an index key on another path.
func (t *kvTx) ListParked(f Filter) ([]*Record, string, error) {
	if err := t.checkRead("ListParked"); err != nil {
		return nil, "", err
	}
	if f.State != "" && !validState(f.State) {
		return nil, "", fmt.Errorf("%w: ListParked: unknown state %q", ErrInvalid, f.State)
	}
	limit := limitOr(f.Limit)
	subs, cur, err := t.listStart(&f)
	if err != nil {
		return nil, "", err
	}
	var (
		out     []*Record
		lastKey []byte
		more    bool
		scanned int
	)
	lower := strings.ToLower(f.Message)
	for i, sub := range subs {
		p, after := cur.path, cur.after
		if i > 0 || cur.after == nil {
			if p, err = t.plan(sub, &f); err != nil {
				return nil, "", fmt.Errorf("ledger: ListParked: %w", err)
			}
			after = nil
		}
		err := t.walk(p, after, func(k, v []byte) (bool, error) {
			scanned++
			_, _, _, aggType, aggID, err := indexKeyParts(k)
			if err != nil {
				return false, err
			}
			s, err := decodeSummary(v, true)
			if err != nil {
				return false, fmt.Errorf("%w: %q", err, k)
			}
			match := matchSummary(&f, lower, aggType, &s)
			if match && f.ProvenBy != "" {
				if match, err = t.proven(sub, f.Group, f.ProvenBy, aggType, aggID); err != nil {
					return false, err
				}
			}
			if match {
				if len(out) == limit {
					more = true
					return false, nil
				}
				r, err := t.record(recordKey(sub, aggType, aggID))
				if err != nil {
					return false, fmt.Errorf("record of index entry %q: %w", k, err)
				}
				out = append(out, r)
				lastKey = append(lastKey[:0], k...)
			}
			if scanned >= MaxScan {
				// Go on after what was looked at, matched or not.
				more, lastKey = true, append(lastKey[:0], k...)
				return false, nil
			}
			return true, nil
		})
		if err != nil {
			return nil, "", fmt.Errorf("ledger: ListParked: %w", err)
		}
		if more {
			break
		}
	}
	if !more || lastKey == nil {
		return out, "", nil
	}
	return out, encodeCursor(lastKey, f.KeyOrder), nil
}

// encodeCursor is the cursor continuing after index key k: on the path of
// every record, or in a listing in key order, its record key.
func encodeCursor(k []byte, keyOrder bool) string {
	sub, dim, _, aggType, aggID, err := indexKeyParts(k)
	if err == nil && (dim == dimAll || keyOrder) {
		k = recordKey(sub, aggType, aggID)
	}
	return base64.RawURLEncoding.EncodeToString(k)
}

// listCursor is where a listing goes on: on path, after the key after.
type listCursor struct {
	path  path
	after []byte
}

// listStart returns the subscriptions a listing walks, in key order, from
// the cursor's on, and the cursor's path within the first.
func (t *kvTx) listStart(f *Filter) ([]string, listCursor, error) {
	var subs []string
	if f.Subscription != "" {
		subs = []string{f.Subscription}
	} else {
		var err error
		if subs, err = t.subscriptionsParked(); err != nil {
			return nil, listCursor{}, fmt.Errorf("ledger: ListParked: %w", err)
		}
	}
	if f.After == "" {
		return subs, listCursor{}, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(f.After)
	if err != nil {
		return nil, listCursor{}, fmt.Errorf("%w: ListParked: bad cursor: %v", ErrInvalid, err)
	}
	var (
		sub   string
		p     path
		after []byte
	)
	if f.KeyOrder {
		// Every path but the time window's is in key order within a
		// subscription: go on after the record on the one planned.
		var aggType, aggID string
		if sub, aggType, aggID, err = parseRecordKey(raw); err != nil {
			return nil, listCursor{}, fmt.Errorf("%w: ListParked: bad cursor for a listing in key order", ErrInvalid)
		}
		if p, err = t.plan(sub, f); err != nil {
			return nil, listCursor{}, fmt.Errorf("ledger: ListParked: %w", err)
		}
		after = appendLP(appendLP(bytes.Clone(p.head), aggType), aggID)
	} else if sub, p, after, err = cursorPath(f, raw); err != nil {
		return nil, listCursor{}, fmt.Errorf("%w: ListParked: bad cursor", ErrInvalid)
	}
	if f.Subscription != "" && sub != f.Subscription {
		return nil, listCursor{}, fmt.Errorf("%w: ListParked: bad cursor", ErrInvalid)
	}
	at := key(kindCount, sub)
	for len(subs) > 0 && bytes.Compare(key(kindCount, subs[0]), at) < 0 {
		subs = subs[1:]
	}
	if len(subs) == 0 || subs[0] != sub {
		// The cursor's subscription has no records left: go on with the next.
		return subs, listCursor{}, nil
	}
	return subs, listCursor{path: p, after: after}, nil
}

// CountMatching implements [ParkedRecords.CountMatching]: from the
// counters when a counter keeps the filter's conditions (countBy), else
// by walking the narrowest path.
func (t *kvTx) CountMatching(f Filter) (int, error) {
	if err := t.checkRead("CountMatching"); err != nil {
		return 0, err
	}
	if f.State != "" && !validState(f.State) {
		return 0, fmt.Errorf("%w: CountMatching: unknown state %q", ErrInvalid, f.State)
	}
	subs := []string{f.Subscription}
	if f.Subscription == "" {
		var err error
		if subs, err = t.subscriptionsParked(); err != nil {
			return 0, fmt.Errorf("ledger: CountMatching: %w", err)
		}
	}
	lower := strings.ToLower(f.Message)
	how := countBy(&f)
	total := 0
	for _, sub := range subs {
		var n int
		var err error
		switch how {
		case byGroupType:
			n, err = t.tally(sub, dimGroupType, groupTypeValue(f.Group, f.AggregateType), statesOf(&f))
		case byGroup:
			n, err = t.tally(sub, dimGroup, f.Group, statesOf(&f))
		case byClass:
			n, err = t.classCount(sub, &f)
		case byType:
			n, err = t.tally(sub, dimType, f.AggregateType, statesOf(&f))
		case byState:
			n, err = t.stateCount(sub, statesOf(&f))
		case byWindow:
			lo, hi := windowStamps(&f)
			n, err = t.countWindow(sub, lo, hi, statesOf(&f))
		case byWalk:
			var p path
			if p, err = t.plan(sub, &f); err == nil {
				err = t.walk(p, nil, func(k, v []byte) (bool, error) {
					_, _, _, aggType, aggID, err := indexKeyParts(k)
					if err != nil {
						return false, err
					}
					s, err := decodeSummary(v, true)
					if err != nil {
						return false, err
					}
					match := matchSummary(&f, lower, aggType, &s)
					if match && f.ProvenBy != "" {
						if match, err = t.proven(sub, f.Group, f.ProvenBy, aggType, aggID); err != nil {
							return false, err
						}
					}
					if match {
						n++
					}
					return true, nil
				})
			}
		}
		if err != nil {
			return 0, fmt.Errorf("ledger: CountMatching: %w", err)
		}
		total += n
	}
	return total, nil
}

// OldestParked implements [ParkedRecords.OldestParked].
func (t *kvTx) OldestParked(subscription string) (time.Time, bool, error) {
	if err := t.checkRead("OldestParked"); err != nil {
		return time.Time{}, false, err
	}
	// The first key is the answer: no value is read (a walk would
	// prefetch a hundred).
	head := indexHead(subscription, dimOldest, nil)
	var (
		oldest time.Time
		err    error
	)
	if k, ok := firstKeyOf(t.txn, head); ok {
		var val []byte
		if _, _, val, _, _, err = indexKeyParts(k); err == nil {
			oldest = unstamp(binary.BigEndian.Uint64(val))
		}
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("ledger: OldestParked %q: %w", subscription, err)
	}
	return oldest, !oldest.IsZero(), nil
}

// ListParkedKeys implements [ParkedRecords.ListParkedKeys].
func (t *kvTx) ListParkedKeys(subscription, after string, limit int) ([]ParkedKey, string, error) {
	if err := t.checkRead("ListParkedKeys"); err != nil {
		return nil, "", err
	}
	limit = limitOr(limit)
	head := indexHead(subscription, dimAll, nil)
	var start []byte
	if after != "" {
		raw, err := base64.RawURLEncoding.DecodeString(after)
		if err != nil {
			return nil, "", fmt.Errorf("%w: ListParkedKeys: bad cursor: %v", ErrInvalid, err)
		}
		s, aggType, aggID, err := parseRecordKey(raw)
		if err != nil || s != subscription {
			return nil, "", fmt.Errorf("%w: ListParkedKeys: bad cursor", ErrInvalid)
		}
		start = indexKey(s, dimAll, nil, aggType, aggID)
	}
	var (
		out  []ParkedKey
		more bool
	)
	err := t.walk(path{prefix: head, start: head}, start, func(k, v []byte) (bool, error) {
		if len(out) == limit {
			more = true
			return false, nil
		}
		_, _, _, aggType, aggID, err := indexKeyParts(k)
		if err != nil {
			return false, err
		}
		s, err := decodeSummary(v, false)
		if err != nil {
			return false, err
		}
		out = append(out, ParkedKey{AggregateType: aggType, AggregateID: aggID, State: s.state,
			NextRetry: s.next, Unrecoverable: s.unrecoverable})
		return true, nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("ledger: ListParkedKeys %q: %w", subscription, err)
	}
	if !more {
		return out, "", nil
	}
	last := out[len(out)-1]
	return out, Cursor(subscription, last.AggregateType, last.AggregateID), nil
}

// cursorPath turns a cursor's key into the path it continues and the key
// to continue after. A record key (what ListParked answered before the
// index, and Cursor makes) continues every record in key order.
func cursorPath(f *Filter, k []byte) (sub string, p path, after []byte, err error) {
	if len(k) > 0 && k[0] == kindRecord {
		s, aggType, aggID, err := parseRecordKey(k)
		if err != nil {
			return "", path{}, nil, err
		}
		ik := indexKey(s, dimAll, nil, aggType, aggID)
		return s, headPath(indexHead(s, dimAll, nil), f.AggregateType), ik, nil
	}
	s, dim, val, aggType, _, err := indexKeyParts(k)
	if err != nil {
		return "", path{}, nil, err
	}
	switch {
	case dim == dimAll:
		p = headPath(indexHead(s, dimAll, nil), f.AggregateType)
	case dim == dimState && string(val) == string(f.State):
		p = headPath(indexHead(s, dimState, val), f.AggregateType)
	case dim == dimClass && string(val) == f.Class:
		p = headPath(indexHead(s, dimClass, val), f.AggregateType)
	case dim == dimClassIn && f.State != "" && string(val) == string(classIn(f.Class, f.State)):
		p = headPath(indexHead(s, dimClassIn, val), f.AggregateType)
	case dim == dimGroup && string(val) == f.Group:
		p = headPath(indexHead(s, dimGroup, val), f.AggregateType)
	case dim == dimFirst:
		p = timePath(s, f)
	default:
		return "", path{}, nil, errBadKey
	}
	if f.AggregateType != "" && dim != dimFirst && aggType != f.AggregateType {
		return "", path{}, nil, errBadKey
	}
	return s, p, k, nil
}

// How CountMatching counts a filter: from which counter, or by a walk.
const (
	byWalk = iota
	byState
	byType
	byClass // a class, or a class and a type
	byGroup
	byGroupType
	byWindow
)

// countBy returns the counter that keeps f's conditions, byWalk when none
// does: a message or a proof, a window with anything but a state, or a
// group with a class.
func countBy(f *Filter) int {
	window := !f.FailedAfter.IsZero() || !f.FailedBefore.IsZero()
	switch {
	case f.Message != "" || f.ProvenBy != "":
		return byWalk
	case window && f.Class == "" && f.AggregateType == "" && f.Group == "":
		return byWindow
	case window, f.Group != "" && f.Class != "":
		return byWalk
	case f.Group != "" && f.AggregateType != "":
		return byGroupType
	case f.Group != "":
		return byGroup
	case f.Class != "":
		return byClass
	case f.AggregateType != "":
		return byType
	}
	return byState
}
