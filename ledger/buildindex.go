package ledger

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/berthhq/berth/ledger/internal/kvtx"
)

// buildBatch is how many records one of BuildIndex's transactions indexes.
const buildBatch = 500

// BuildIndex indexes the parked records of a store written before the
// index (or by a host that did not keep it), or before the index kept
// failure groups (its entries are rewritten), or before the counters per
// class and type and per time bucket (counted from the summaries), in transactions
// of a few hundred records; then puts the resuming records of a store
// indexed before the 'r' path on it (reading those records' entries
// alone), and marks the store indexed. A marked store costs one read. It
// may run on several hosts of a shared store at once: a record already
// indexed is passed over. Open runs it; ledger/jetstream's Open too.
func BuildIndex(ctx context.Context, s Store) error {
	var mark byte
	if err := s.View(ctx, func(tx Tx) error {
		v, err := tx.(*kvTx).get(indexMarkKey())
		if err == nil && len(v) == 1 {
			mark = v[0]
		}
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		return err
	}); err != nil || mark >= indexVersion {
		return err
	}
	if mark < countedVersion {
		if err := indexRecords(ctx, s); err != nil {
			return err
		}
	}
	return indexResuming(ctx, s)
}

// indexRecords indexes and counts every record not indexed and counted
// yet, and marks the store countedVersion.
func indexRecords(ctx context.Context, s Store) error {
	var after []byte
	for {
		var last []byte
		done := false
		err := s.Update(ctx, func(tx Tx) error {
			t := tx.(*kvTx)
			last, done = nil, false
			type rec struct {
				r                   *Record  // nil: indexed with its group, not yet counted
				old                 *summary // its entries as they are, if any
				sub, aggType, aggID string
			}
			var todo []rec
			start := []byte{kindRecord}
			if after != nil {
				start = append(bytes.Clone(after), 0)
			}
			n := 0
			err := t.scan([]byte{kindRecord}, start, func(k, v []byte) (bool, error) {
				if n == buildBatch {
					return false, nil
				}
				n++
				last = bytes.Clone(k)
				sub, aggType, aggID, err := parseRecordKey(k)
				if err != nil {
					return false, err
				}
				var old *summary
				if iv, err := t.get(indexKey(sub, dimAll, nil, aggType, aggID)); err == nil {
					s, err := decodeSummary(iv, true)
					if err != nil {
						return false, fmt.Errorf("%w: of record %q", err, k)
					}
					switch {
					case s.counted:
						return true, nil
					case s.group != "":
						// Its summary has all it needs.
						todo = append(todo, rec{old: &s, sub: sub, aggType: aggType, aggID: aggID})
						return true, nil
					}
					old = &s
				} else if !errors.Is(err, ErrNotFound) {
					return false, err
				}
				r := new(Record)
				if err := json.Unmarshal(v, r); err != nil {
					return false, fmt.Errorf("corrupt record %q: %w", k, err)
				}
				todo = append(todo, rec{r: r, old: old})
				return true, nil
			})
			if err != nil {
				return err
			}
			for _, x := range todo {
				r := x.r
				if r == nil {
					if err := t.countIn("BuildIndex", x.sub, x.aggType, x.aggID, *x.old); err != nil {
						return err
					}
					continue
				}
				if x.old != nil {
					if err := t.unindex("BuildIndex", r.Subscription, r.AggregateType, r.AggregateID, *x.old); err != nil {
						return err
					}
				}
				s := summarize(r)
				if err := t.index("BuildIndex", r.Subscription, r.AggregateType, r.AggregateID, s); err != nil {
					return err
				}
				if err := t.joinGroup("BuildIndex", r, s, true, false); err != nil {
					return err
				}
			}
			if n < buildBatch {
				done = true
				return t.set("BuildIndex", indexMarkKey(), []byte{countedVersion})
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("ledger: indexing the parked records: %w", err)
		}
		if done {
			return nil
		}
		after = last
	}
}

// countIn puts a record indexed before the counters of counters.go, with
// summary s, in them, and marks its entries counted.
func (t *kvTx) countIn(op, sub, aggType, aggID string, s summary) error {
	s.counted = true
	return t.writeEntries(op, sub, aggType, aggID, s, countedTallies(sub, aggType, s))
}

// indexResuming puts every resuming record on the 'r' path (a store
// indexed before it has them on the state path alone), a subscription and
// a few hundred records a transaction, then marks the store indexVersion.
func indexResuming(ctx context.Context, s Store) error {
	var subs []string
	if err := s.View(ctx, func(tx Tx) error {
		var err error
		subs, err = tx.(*kvTx).indexedSubscriptions()
		return err
	}); err != nil {
		return fmt.Errorf("ledger: indexing the resuming records: %w", err)
	}
	for _, sub := range subs {
		head := indexHead(sub, dimState, []byte(StateResuming))
		start := head
		for more := true; more; {
			err := s.Update(ctx, func(tx Tx) error {
				t := tx.(*kvTx)
				more = false
				type entry struct{ k, v []byte }
				var todo []entry
				err := t.scan(head, start, func(k, v []byte) (bool, error) {
					if len(todo) == buildBatch {
						more = true
						return false, nil
					}
					todo = append(todo, entry{bytes.Clone(k), bytes.Clone(v)})
					return true, nil
				})
				if err != nil {
					return err
				}
				for _, e := range todo {
					_, _, _, aggType, aggID, err := indexKeyParts(e.k)
					if err != nil {
						return fmt.Errorf("%w: %q", err, e.k)
					}
					sm, err := decodeSummary(e.v, false)
					if err != nil {
						return fmt.Errorf("%w: %q", err, e.k)
					}
					if err := t.set("BuildIndex", indexKey(sub, dimResumed, stampBytes(sm.first), aggType, aggID), e.v); err != nil {
						return err
					}
				}
				if len(todo) > 0 {
					start = append(bytes.Clone(todo[len(todo)-1].k), 0)
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("ledger: indexing the resuming records of %s: %w", sub, err)
			}
		}
	}
	err := s.Update(ctx, func(tx Tx) error {
		return tx.(*kvTx).set("BuildIndex", indexMarkKey(), []byte{indexVersion})
	})
	if err != nil {
		return fmt.Errorf("ledger: indexing the resuming records: %w", err)
	}
	return nil
}

// indexedSubscriptions lists the subscriptions with index entries, one
// seek each.
func (t *kvTx) indexedSubscriptions() ([]string, error) {
	var subs []string
	it := t.txn.Iterate([]byte{kindIndex}, false)
	defer it.Close()
	for it.Seek([]byte{kindIndex}); it.Valid(); {
		sub, _, ok := cutLP(it.Key()[1:])
		if !ok {
			return nil, fmt.Errorf("%w: %q", errBadKey, it.Key())
		}
		subs = append(subs, sub)
		it.Seek(kvtx.PrefixEnd(key(kindIndex, sub)))
	}
	return subs, nil
}
