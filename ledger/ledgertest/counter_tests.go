package ledgertest

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/berthhq/berth/ledger"
)

// testCounters: the counts a counter answers — a class and an aggregate
// type, a time window, each with and without a state, in one
// subscription or all — are exact after parks, resumes, skips and
// resolves, re-parks that move a record's class, type bucket or first
// failure, and a reopen. The first failures spread over four days, down
// to the millisecond, some at the zero time; the windows end on records'
// own times, a nanosecond either side, less than a second wide or open.
func testCounters(t *testing.T, open Opener) {
	name := t.TempDir()
	s := openAt(t, open, name)
	rng := rand.New(rand.NewPCG(33, 3))
	subs := []string{"sub-a", "sub-b"}
	types := []string{"order", "cart"}
	states := []ledger.State{ledger.StateRetrying, ledger.StateWaiting, ledger.StateResuming}
	chains := [][]string{nil, {"Timeout", "Downstream"}, {"Refused", "Downstream"}, {"NullPointer"}, {"Downstream", "Downstream"}}
	firstAt := func() time.Time {
		if rng.IntN(12) == 0 {
			return time.Time{}
		}
		return base().Add(time.Duration(rng.Int64N(int64(96 * time.Hour))).Truncate(time.Millisecond))
	}
	mk := func(i int) *ledger.Record {
		r := rec(subs[rng.IntN(2)], types[rng.IntN(2)], fmt.Sprintf("id-%03d", i), states[rng.IntN(3)], time.Minute)
		r.Error.Classes, r.FirstFailure = chains[rng.IntN(len(chains))], firstAt()
		return r
	}
	all := map[string]*ledger.Record{}
	keyOf := func(r *ledger.Record) string { return r.Subscription + "|" + r.AggregateType + "|" + r.AggregateID }
	var parked []*ledger.Record
	for i := range 180 {
		parked = append(parked, mk(i))
	}
	// A burst: ten records within one second.
	for i := range 10 {
		r := mk(200 + i)
		r.Subscription, r.FirstFailure = "sub-a", base().Add(30*time.Hour+time.Duration(i)*77*time.Millisecond)
		parked = append(parked, r)
	}
	put(t, s, parked...)
	for _, r := range parked {
		all[keyOf(r)] = r
	}
	checkCounters(t, s, "after the parks", all, rng)

	// Resume some, skip or resolve some, park some again changed.
	update(t, s, func(tx ledger.Tx) error {
		for i, r := range parked {
			switch i % 6 {
			case 0: // a resume
				r.State, r.NextRetry = ledger.StateResuming, time.Time{}
				if err := tx.PutParked(r); err != nil {
					return err
				}
			case 1: // a skip, or the resume's end
				if err := tx.DeleteParked(r.Subscription, r.AggregateType, r.AggregateID); err != nil {
					return err
				}
				delete(all, keyOf(r))
			case 2: // parked again: another class, another time, maybe another state
				c := mk(i)
				r.State, r.NextRetry, r.Error.Classes, r.FirstFailure = c.State, c.NextRetry, c.Error.Classes, c.FirstFailure
				if err := tx.PutParked(r); err != nil {
					return err
				}
			}
		}
		return nil
	})
	checkCounters(t, s, "after resumes, skips and re-parks", all, rng)
	// Resolved and parked anew, under the same key.
	update(t, s, func(tx ledger.Tx) error {
		for i, r := range parked {
			if i%12 == 1 {
				r.FirstFailure = firstAt()
				if err := tx.PutParked(r); err != nil {
					return err
				}
				all[keyOf(r)] = r
			}
		}
		return nil
	})
	checkCounters(t, s, "after parks of resolved aggregates", all, rng)

	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, open, name)
	checkCounters(t, s, "after a reopen", all, rng)
}

// checkCounters compares CountMatching for windows, classes and types with
// the records that match each.
func checkCounters(t *testing.T, s ledger.Store, when string, all map[string]*ledger.Record, rng *rand.Rand) {
	t.Helper()
	// The windows end at real times (the zero time is an unknown first
	// failure, not one to count from).
	var times []time.Time
	for _, r := range all {
		if !r.FirstFailure.IsZero() {
			times = append(times, r.FirstFailure)
		}
	}
	pick := func() time.Time {
		at := times[rng.IntN(len(times))]
		return at.Add(time.Duration(rng.IntN(3)-1) * time.Nanosecond)
	}
	var filters []ledger.Filter
	for range 60 {
		f := ledger.Filter{FailedAfter: pick(), FailedBefore: pick()}
		switch rng.IntN(5) {
		case 0:
			f.FailedAfter = time.Time{}
		case 1:
			f.FailedBefore = time.Time{}
		case 2:
			f.FailedBefore = f.FailedAfter.Add(time.Duration(rng.IntN(1000)) * time.Millisecond)
		}
		if f.FailedAfter.IsZero() && f.FailedBefore.IsZero() {
			f.FailedBefore = base().Add(48 * time.Hour)
		}
		filters = append(filters, f)
	}
	for _, c := range []string{"Downstream", "Timeout", "NullPointer", "Nobody"} {
		for _, typ := range []string{"order", "cart", "none"} {
			filters = append(filters, ledger.Filter{Class: c, AggregateType: typ})
		}
	}
	for _, f := range filters {
		for _, sub := range []string{"", "sub-a", "sub-b"} {
			for _, st := range []ledger.State{"", ledger.StateRetrying, ledger.StateWaiting, ledger.StateResuming} {
				g := f
				g.Subscription, g.State = sub, st
				want := 0
				for _, r := range all {
					if (sub == "" || r.Subscription == sub) && (g.AggregateType == "" || r.AggregateType == g.AggregateType) && g.Matches(r) {
						want++
					}
				}
				view(t, s, func(tx ledger.Tx) error {
					got, err := tx.CountMatching(g)
					if err != nil || got != want {
						t.Errorf("%s: CountMatching(%+v) = %d, %v; want %d", when, g, got, err, want)
					}
					return nil
				})
			}
		}
	}
}
