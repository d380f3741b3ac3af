package ledgertest

import (
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/berthhq/berth/ledger"
)

// testReadsAfterEachChange: the reads a store may answer from memory
// (ledger's Badger keeps its counters and the oldest parked between
// writes) are exact after each single change — a park, a resume, a
// resolve, a skip, an older park, a write that fails — each read twice in
// a row (the second may come from memory) and again after a reopen. The
// reads: CountParked, CountMatching by state, class, type, class and type
// and a window, OldestParked, and the listings that match nothing.
func testReadsAfterEachChange(t *testing.T, open Opener) {
	name := t.TempDir()
	s := openAt(t, open, name)
	all := map[string]*ledger.Record{}
	mk := func(id string, state ledger.State, class string, first time.Time) *ledger.Record {
		r := rec("sub-a", "order", id, state, time.Minute)
		r.Error.Classes, r.FirstFailure = []string{class, "Downstream"}, first
		return r
	}
	// change writes fn and checks the reads against all, changed first.
	change := func(when string, fn func(tx ledger.Tx) error) {
		t.Helper()
		update(t, s, fn)
		checkReads(t, s, when, all)
	}
	checkReads(t, s, "empty", all)
	for i := range 3 {
		r := mk(fmt.Sprintf("o-%d", i), ledger.StateRetrying, "Timeout", base().Add(time.Duration(i)*time.Hour))
		all[r.AggregateID] = r
		change("a park", func(tx ledger.Tx) error { return tx.PutParked(r) })
	}
	resumed := *all["o-0"]
	resumed.State, resumed.NextRetry = ledger.StateResuming, time.Time{}
	all["o-0"] = &resumed
	change("a resume", func(tx ledger.Tx) error { return tx.PutParked(&resumed) })
	delete(all, "o-0")
	change("a resolve", func(tx ledger.Tx) error { return tx.DeleteParked("sub-a", "order", "o-0") })
	waiting := *all["o-2"]
	waiting.State, waiting.NextRetry = ledger.StateWaiting, time.Time{}
	all["o-2"] = &waiting
	change("a wait", func(tx ledger.Tx) error { return tx.PutParked(&waiting) })
	delete(all, "o-1")
	change("a skip", func(tx ledger.Tx) error { return tx.DeleteParked("sub-a", "order", "o-1") })
	older := mk("o-9", ledger.StateRetrying, "Refused", base().Add(-48*time.Hour))
	all["o-9"] = older
	change("an older park", func(tx ledger.Tx) error { return tx.PutParked(older) })

	// A write that fails changes nothing, though it changed every counter
	// before failing.
	failed := errors.New("the closure failed")
	err := s.Update(t.Context(), func(tx ledger.Tx) error {
		for _, r := range []*ledger.Record{mk("o-20", ledger.StateRetrying, "Timeout", base().Add(-72*time.Hour)),
			mk("o-21", ledger.StateWaiting, "Nobody", base())} {
			if err := tx.PutParked(r); err != nil {
				return err
			}
		}
		if err := tx.DeleteParked("sub-a", "order", "o-9"); err != nil {
			return err
		}
		return failed
	})
	if !errors.Is(err, failed) {
		t.Fatalf("the failing update: %v, want %v", err, failed)
	}
	checkReads(t, s, "after a failed write", all)

	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, open, name)
	checkReads(t, s, "after a reopen", all)
}

// checkReads compares the reads of testReadsAfterEachChange with all,
// twice.
func checkReads(t *testing.T, s ledger.Store, when string, all map[string]*ledger.Record) {
	t.Helper()
	count := func(f ledger.Filter) int {
		n := 0
		for _, r := range all {
			if (f.AggregateType == "" || r.AggregateType == f.AggregateType) && f.Matches(r) {
				n++
			}
		}
		return n
	}
	var oldest time.Time
	states := map[ledger.State]int{}
	for _, r := range all {
		states[r.State]++
		if r.State != ledger.StateResuming && (oldest.IsZero() || r.FirstFailure.Before(oldest)) {
			oldest = r.FirstFailure
		}
	}
	var filters []ledger.Filter
	for _, st := range []ledger.State{"", ledger.StateRetrying, ledger.StateWaiting, ledger.StateResuming} {
		for _, c := range []string{"", "Timeout", "Refused", "Downstream", "Nobody"} {
			for _, typ := range []string{"", "order", "cart"} {
				filters = append(filters, ledger.Filter{Subscription: "sub-a", State: st, Class: c, AggregateType: typ})
			}
		}
		filters = append(filters, ledger.Filter{Subscription: "sub-a", State: st,
			FailedAfter: base().Add(-30 * time.Minute), FailedBefore: base().Add(90 * time.Minute)})
	}
	for pass := range 2 {
		view(t, s, func(tx ledger.Tx) error {
			c, err := tx.CountParked("sub-a")
			if err != nil || !maps.Equal(c, states) {
				t.Errorf("%s, read %d: CountParked = %v, %v; want %v", when, pass, c, err, states)
			}
			at, ok, err := tx.OldestParked("sub-a")
			if err != nil || ok != !oldest.IsZero() || !at.Equal(oldest) {
				t.Errorf("%s, read %d: OldestParked = %v, %v, %v; want %v", when, pass, at, ok, err, oldest)
			}
			for _, f := range filters {
				want := count(f)
				if got, err := tx.CountMatching(f); err != nil || got != want {
					t.Errorf("%s, read %d: CountMatching(%+v) = %d, %v; want %d", when, pass, f, got, err, want)
				}
				if want != 0 {
					continue
				}
				if rs, _, err := tx.ListParked(f); err != nil || len(rs) != 0 {
					t.Errorf("%s, read %d: ListParked(%+v) = %d records, %v; want none", when, pass, f, len(rs), err)
				}
			}
			return nil
		})
	}
}
