package ledgertest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/berthhq/berth/ledger"
)

// testIndexAgrees: whatever path a filter's listing takes, it lists
// exactly the records Filter.Matches selects, each once, paged or not, in
// key order when asked; CountMatching counts them; OldestParked is the
// earliest first failure of those retrying or waiting; ListParkedKeys
// lists every record's key and state. Records are put, changed and deleted
// at random first, so the index follows every change.
func testIndexAgrees(t *testing.T, open Opener) {
	s := openNew(t, open)
	rng := rand.New(rand.NewPCG(30, 1))
	subs := []string{"sub-a", "sub-b", "s"}
	types := []string{"order", "cart", "o"}
	states := []ledger.State{ledger.StateRetrying, ledger.StateWaiting, ledger.StateResuming}
	chains := [][]string{nil, {"Timeout", "Downstream"}, {"ConnectionRefused", "Downstream"}, {"NullPointer"}, {"Downstream"}}
	msgs := []string{"dial tcp: Connection refused", "deadline exceeded", "nil map write", "buyer 42 unknown", "buyer 7 unknown"}
	mk := func(i int) *ledger.Record {
		r := rec(subs[rng.IntN(len(subs))], types[rng.IntN(len(types))], fmt.Sprintf("id-%d", i), states[rng.IntN(3)], 0)
		r.Error = ledger.ErrorInfo{Classes: chains[rng.IntN(len(chains))], Message: msgs[rng.IntN(len(msgs))], Kind: "recoverable"}
		if rng.IntN(10) > 0 {
			r.FirstFailure = base().Add(-time.Duration(rng.IntN(1000)) * time.Minute)
		} else {
			r.FirstFailure = time.Time{}
		}
		if r.State == ledger.StateRetrying {
			r.NextRetry = base().Add(time.Duration(rng.IntN(100)) * time.Minute)
		}
		return r
	}
	const n = 240
	all := map[string]*ledger.Record{}
	keyOf := func(r *ledger.Record) string { return r.Subscription + "|" + r.AggregateType + "|" + r.AggregateID }
	for i := 0; i < n; i += 40 {
		update(t, s, func(tx ledger.Tx) error {
			for j := i; j < i+40; j++ {
				r := mk(j)
				if err := tx.PutParked(r); err != nil {
					return err
				}
				all[keyOf(r)] = r
			}
			return nil
		})
	}
	// Change some (state, class, first failure), delete some.
	update(t, s, func(tx ledger.Tx) error {
		i := 0
		for k, r := range all {
			i++
			switch i % 5 {
			case 0:
				if err := tx.DeleteParked(r.Subscription, r.AggregateType, r.AggregateID); err != nil {
					return err
				}
				delete(all, k)
			case 1:
				c := mk(0)
				r.State, r.NextRetry, r.Error, r.FirstFailure = c.State, c.NextRetry, c.Error, c.FirstFailure
				if err := tx.PutParked(r); err != nil {
					return err
				}
			}
		}
		return nil
	})
	at := func(min int) time.Time { return base().Add(-time.Duration(min) * time.Minute) }
	filters := []ledger.Filter{{}}
	for range 120 {
		var f ledger.Filter
		if rng.IntN(2) == 0 {
			f.Subscription = subs[rng.IntN(len(subs))]
		}
		if rng.IntN(3) == 0 {
			f.State = states[rng.IntN(3)]
		}
		if rng.IntN(3) == 0 {
			f.AggregateType = types[rng.IntN(len(types))]
		}
		if rng.IntN(3) == 0 {
			f.Class = []string{"Downstream", "Timeout", "NullPointer", "Nobody"}[rng.IntN(4)]
		}
		if rng.IntN(4) == 0 {
			f.Message = []string{"REFUSED", "buyer", "exceeded", "zzz"}[rng.IntN(4)]
		}
		if rng.IntN(4) == 0 {
			f.Group = ledger.Fingerprint(mk(0)) // the group of a record like those put
		}
		if rng.IntN(3) == 0 {
			f.FailedAfter = at(rng.IntN(1000))
		}
		if rng.IntN(3) == 0 {
			f.FailedBefore = at(rng.IntN(1000))
		}
		filters = append(filters, f)
	}
	for _, f := range filters {
		var want []string
		for k, r := range all {
			if (f.Subscription == "" || r.Subscription == f.Subscription) &&
				(f.AggregateType == "" || r.AggregateType == f.AggregateType) && f.Matches(r) {
				want = append(want, k)
			}
		}
		slices.Sort(want)
		for _, keyOrder := range []bool{false, true} {
			for _, limit := range []int{1, 7, 1000} {
				view(t, s, func(tx ledger.Tx) error {
					var got []string
					g := f
					g.Limit, g.KeyOrder = limit, keyOrder
					for pages := 0; ; pages++ {
						page, next, err := tx.ListParked(g)
						if err != nil {
							t.Fatalf("%+v: ListParked: %v", g, err)
						}
						for _, r := range page {
							got = append(got, keyOf(r))
						}
						if next == "" {
							break
						}
						if pages > n {
							t.Fatalf("%+v: more pages than records", g)
						}
						g.After = next
					}
					sorted := slices.Sorted(slices.Values(got))
					if !slices.Equal(sorted, want) {
						t.Fatalf("filter %+v (limit %d, key order %v): listed %v, want %v", f, limit, keyOrder, sorted, want)
					}
					return nil
				})
			}
		}
		view(t, s, func(tx ledger.Tx) error {
			c, err := tx.CountMatching(f)
			if err != nil {
				t.Fatalf("%+v: CountMatching: %v", f, err)
			}
			if c != len(want) {
				t.Errorf("filter %+v: CountMatching %d, want %d", f, c, len(want))
			}
			return nil
		})
	}
	view(t, s, func(tx ledger.Tx) error {
		for _, sub := range subs {
			var oldest time.Time
			keys := map[string]ledger.State{}
			for _, r := range all {
				if r.Subscription != sub {
					continue
				}
				keys[r.AggregateType+"|"+r.AggregateID] = r.State
				if r.State != ledger.StateResuming && !r.FirstFailure.IsZero() && (oldest.IsZero() || r.FirstFailure.Before(oldest)) {
					oldest = r.FirstFailure
				}
			}
			got, ok, err := tx.OldestParked(sub)
			if err != nil || ok != !oldest.IsZero() || !got.Equal(oldest) {
				t.Errorf("OldestParked(%s) = %v, %v, %v; want %v", sub, got, ok, err, oldest)
			}
			listed := map[string]ledger.State{}
			after := ""
			for {
				page, next, err := tx.ListParkedKeys(sub, after, 9)
				if err != nil {
					t.Fatalf("ListParkedKeys(%s): %v", sub, err)
				}
				for _, k := range page {
					listed[k.AggregateType+"|"+k.AggregateID] = k.State
					r := all[sub+"|"+k.AggregateType+"|"+k.AggregateID]
					if r != nil && !k.NextRetry.Equal(r.NextRetry) {
						t.Errorf("ListParkedKeys(%s): %s/%s next retry %v, want %v", sub, k.AggregateType, k.AggregateID, k.NextRetry, r.NextRetry)
					}
				}
				if next == "" {
					break
				}
				after = next
			}
			if fmt.Sprint(listed) != fmt.Sprint(keys) {
				t.Errorf("ListParkedKeys(%s) = %v, want %v", sub, listed, keys)
			}
		}
		return nil
	})
}
