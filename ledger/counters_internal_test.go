package ledger

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// TestBuildIndexCountsAStoreOfVersion2: a store indexed before the
// counters per class and type and per time bucket (summaries without the
// counted byte, none of those counters, marked 2) gets them at Open, from
// its summaries, in batches: the counts they answer are exact, a record
// changed and one resolved before the upgrade included, and the store is
// marked 3.
func TestBuildIndexCountsAStoreOfVersion2(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	const n = buildBatch*2 + 41
	first := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	all := parkOrders(t, s, n, first, 7*time.Second, 3, func(int) State { return StateWaiting })
	// Make it a store of version 2.
	err = rewriteStore(s, 2, func(k, v []byte) ([]byte, bool, error) {
		switch k[0] {
		case kindTally:
			_, rest, _ := cutLP(k[1:])
			return nil, rest[0] == dimClassType || rest[0] == dimBucket, nil
		case kindIndex:
			sm, err := decodeSummary(v, true)
			if err != nil || !sm.counted {
				return nil, false, fmt.Errorf("entry %q: counted %v, %v", k, sm.counted, err)
			}
			sm.counted = false
			return sm.encode(), false, nil
		}
		return nil, false, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Before the upgrade: one record changes state and time, one is resolved.
	if err := s.Update(ctx, func(tx Tx) error {
		r := all["order/o-0001"]
		r.State, r.NextRetry, r.FirstFailure = StateRetrying, first, first.Add(-time.Hour)
		if err := tx.PutParked(r); err != nil {
			return err
		}
		delete(all, "order/o-0002")
		return tx.DeleteParked("sub", "order", "o-0002")
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(dir, Options{}); err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	var filters []Filter
	for _, c := range []string{"Downstream", "NullPointer", "Nobody"} {
		for _, typ := range []string{"order", "cart"} {
			filters = append(filters, Filter{Class: c, AggregateType: typ}, Filter{Class: c, AggregateType: typ, State: StateRetrying})
		}
	}
	for _, w := range [][2]time.Duration{{-2 * time.Hour, 0}, {0, 7 * time.Second}, {90 * time.Second, 95 * time.Minute}, {3 * time.Second, 5 * time.Hour}} {
		filters = append(filters, Filter{FailedAfter: first.Add(w[0]), FailedBefore: first.Add(w[1])},
			Filter{FailedAfter: first.Add(w[0]), FailedBefore: first.Add(w[1]), State: StateWaiting})
	}
	filters = append(filters, Filter{FailedAfter: first.Add(time.Hour)}, Filter{FailedBefore: first.Add(time.Hour)})
	checkCounts(t, s, filters, all)
	err = s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(indexMarkKey())
		if err != nil {
			return err
		}
		v, err := item.ValueCopy(nil)
		if err == nil && (len(v) != 1 || v[0] != indexVersion) {
			err = fmt.Errorf("marked %v, want %d", v, indexVersion)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// rewriteStore makes s a store of an earlier host marked mark: edit is
// given every key and value, and says to delete the key, or to set it to
// a value other than nil.
func rewriteStore(s *Badger, mark byte, edit func(k, v []byte) (set []byte, del bool, err error)) error {
	return s.db.Update(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.DefaultIteratorOptions)
		defer it.Close()
		var del [][]byte
		set := map[string][]byte{}
		for it.Rewind(); it.Valid(); it.Next() {
			k := it.Item().KeyCopy(nil)
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			nv, d, err := edit(k, v)
			switch {
			case err != nil:
				return err
			case d:
				del = append(del, k)
			case nv != nil:
				set[string(k)] = nv
			}
		}
		for _, k := range del {
			if err := txn.Delete(k); err != nil {
				return err
			}
		}
		for k, v := range set {
			if err := txn.Set([]byte(k), v); err != nil {
				return err
			}
		}
		return txn.Set(indexMarkKey(), []byte{mark})
	})
}

// TestResumingCountersOfAnEarlierHost: a store whose resuming records
// are in the counters per class and type and per time bucket (as a host
// before session 34 kept them, their summaries saying so) counts exactly
// with a host that keeps no resuming record there; and as those records
// change state or are resolved, they are taken out of the counters they
// were put in, so that none of state resuming is left.
func TestResumingCountersOfAnEarlierHost(t *testing.T) {
	ctx := context.Background()
	s, err := Open("", Options{InMemory: true, MemTableSize: 4 << 20, BlockCacheSize: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	first := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	all := parkOrders(t, s, 300, first, 1300*time.Millisecond, 4, func(j int) State {
		return []State{StateWaiting, StateRetrying, StateResuming}[j%3]
	})
	resumingTallies := func() int {
		t.Helper()
		c := 0
		err := s.View(ctx, func(tx Tx) error {
			return tx.(*kvTx).scan([]byte{kindTally}, nil, func(k, _ []byte) (bool, error) {
				if _, rest, _ := cutLP(k[1:]); (rest[0] == dimClassType || rest[0] == dimBucket) &&
					bytes.HasSuffix(k, appendLP(nil, string(StateResuming))) {
					c++
				}
				return true, nil
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if c := resumingTallies(); c != 0 {
		t.Fatalf("%d counters of resuming records, want none", c)
	}
	// Make the resuming records those of an earlier host: in the counters.
	err = s.Update(ctx, func(tx Tx) error {
		kt := tx.(*kvTx)
		for _, r := range all {
			if r.State != StateResuming {
				continue
			}
			sm, _, err := kt.summaryOf(r.Subscription, r.AggregateType, r.AggregateID)
			if err != nil {
				return err
			}
			sm.resumingCounted = true
			if err := kt.writeEntries("test", r.Subscription, r.AggregateType, r.AggregateID, sm, countedTallies(r.Subscription, r.AggregateType, sm)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if c := resumingTallies(); c == 0 {
		t.Fatal("no counters of resuming records in the earlier host's store")
	}
	check := func() {
		t.Helper()
		var filters []Filter
		for _, st := range []State{"", StateResuming, StateWaiting} {
			for _, c := range []string{"Downstream", "NullPointer"} {
				for _, typ := range []string{"order", "cart"} {
					filters = append(filters, Filter{Class: c, AggregateType: typ, State: st})
				}
			}
			for _, w := range [][2]time.Duration{{0, time.Minute}, {90 * time.Second, 95 * time.Second}, {3 * time.Second, 5 * time.Hour}} {
				filters = append(filters, Filter{FailedAfter: first.Add(w[0]), FailedBefore: first.Add(w[1]), State: st})
			}
		}
		checkCounts(t, s, filters, all)
	}
	check()
	// Every earlier resuming record changes: a third waits again, the rest
	// are resolved.
	err = s.Update(ctx, func(tx Tx) error {
		i := 0
		for k, r := range all {
			if r.State != StateResuming {
				continue
			}
			if i++; i%3 == 0 {
				r.State = StateWaiting
				if err := tx.PutParked(r); err != nil {
					return err
				}
				continue
			}
			delete(all, k)
			if err := tx.DeleteParked(r.Subscription, r.AggregateType, r.AggregateID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	check()
	if c := resumingTallies(); c != 0 {
		t.Fatalf("%d counters of resuming records left after every earlier one changed", c)
	}
}

// checkCounts checks CountMatching of each filter against the records
// all holds.
func checkCounts(t *testing.T, s *Badger, filters []Filter, all map[string]*Record) {
	t.Helper()
	err := s.View(context.Background(), func(tx Tx) error {
		for _, f := range filters {
			want := 0
			for _, r := range all {
				if (f.AggregateType == "" || r.AggregateType == f.AggregateType) && f.Matches(r) {
					want++
				}
			}
			if got, err := tx.CountMatching(f); err != nil || got != want {
				t.Errorf("CountMatching(%+v) = %d, %v; want %d", f, got, err, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// parkOrders parks n records of subscription "sub", 250 a transaction,
// and returns them by type/id: record j in state(j), failed first at
// first + j*step, a cart of class NullPointer when j%cartEvery is 0, else
// an order of classes Timeout and Downstream.
func parkOrders(t *testing.T, s *Badger, n int, first time.Time, step time.Duration, cartEvery int, state func(j int) State) map[string]*Record {
	t.Helper()
	all := map[string]*Record{}
	for i := 0; i < n; i += 250 {
		err := s.Update(context.Background(), func(tx Tx) error {
			for j := i; j < min(i+250, n); j++ {
				r := &Record{Subscription: "sub", AggregateType: "order", AggregateID: fmt.Sprintf("o-%04d", j),
					State: state(j), FirstFailure: first.Add(time.Duration(j) * step),
					Error: ErrorInfo{Classes: []string{"Timeout", "Downstream"}, Message: "deadline"}}
				if j%cartEvery == 0 {
					r.AggregateType, r.Error.Classes = "cart", []string{"NullPointer"}
				}
				if err := tx.PutParked(r); err != nil {
					return err
				}
				all[r.AggregateType+"/"+r.AggregateID] = r
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return all
}
