package ledgertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/berthhq/berth/ledger"
)

// testAudit: entries get increasing Seqs that survive a reopen, page in
// order, and the sweep removes only those older than its bound.
func testAudit(t *testing.T, open Opener) {
	dir := t.TempDir()
	s := openAt(t, open, dir)
	for i := range 5 {
		update(t, s, func(tx ledger.Tx) error {
			return tx.Audit(ledger.AuditEntry{Time: base().Add(time.Duration(i) * time.Hour), Actor: "ops",
				Action: "POST /v1/subscriptions/{name}/pause", Target: "sub-a", Reason: "deploy", Status: 200})
		})
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, open, dir)
	update(t, s, func(tx ledger.Tx) error {
		return tx.Audit(ledger.AuditEntry{Action: "POST /v1/config/reload", Actor: "root"})
	})
	view(t, s, func(tx ledger.Tx) error {
		all, err := tx.AuditLog(0, 0)
		if err != nil || len(all) != 6 {
			t.Fatalf("AuditLog = %d entries, %v", len(all), err)
		}
		for i, e := range all {
			if e.Seq != uint64(i+1) {
				t.Errorf("entry %d has Seq %d", i, e.Seq)
			}
		}
		if all[0].Actor != "ops" || all[0].Target != "sub-a" || all[0].Reason != "deploy" || all[0].Status != 200 || !all[0].Time.Equal(base()) {
			t.Errorf("entry 1 read back as %+v", all[0])
		}
		if all[5].Time.IsZero() {
			t.Error("an entry without a time got none")
		}
		if page, _ := tx.AuditLog(2, 2); len(page) != 2 || page[0].Seq != 3 {
			t.Errorf("AuditLog(2, 2) = %+v", page)
		}
		return nil
	})
	// Sweep what is older than base+2h, one at a time.
	for more := true; more; {
		update(t, s, func(tx ledger.Tx) error {
			var err error
			more, err = tx.SweepAudit(base().Add(2*time.Hour), 1)
			return err
		})
	}
	view(t, s, func(tx ledger.Tx) error {
		left, _ := tx.AuditLog(0, 0)
		if len(left) != 4 || left[0].Seq != 3 {
			t.Errorf("after the sweep: %d entries, first Seq %d; want 4 from Seq 3", len(left), left[0].Seq)
		}
		return nil
	})
	if err := s.Update(context.Background(), func(tx ledger.Tx) error { return tx.Audit(ledger.AuditEntry{}) }); !errors.Is(err, ledger.ErrInvalid) {
		t.Errorf("an entry without an action: %v, want ErrInvalid", err)
	}
}

// testResolved: a deleted (resolved) record is kept with its history, each
// resolution of an aggregate apart, listed by subscription, type and id,
// and swept by resolution time.
func testResolved(t *testing.T, open Opener) {
	s := openNew(t, open)
	resolve := func(sub, id string, at time.Time) {
		r := rec(sub, "order", id, ledger.StateResuming, 0)
		r.History = append(r.History, ledger.Entry{Time: at, Action: "resume", Actor: "ops", Reason: "fixed"})
		put(t, s, r)
		update(t, s, func(tx ledger.Tx) error { return tx.DeleteParked(sub, "order", id) })
	}
	resolve("sub-a", "o-1", base())
	resolve("sub-a", "o-1", base().Add(time.Hour)) // parked and resolved again
	resolve("sub-a", "o-2", base().Add(2*time.Hour))
	resolve("sub-b", "o-1", base().Add(3*time.Hour))
	view(t, s, func(tx ledger.Tx) error {
		if _, err := tx.Parked("sub-a", "order", "o-1"); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("a resolved record is still parked: %v", err)
		}
		for _, tc := range []struct {
			f    ledger.ResolvedFilter
			want int
		}{
			{ledger.ResolvedFilter{}, 4},
			{ledger.ResolvedFilter{Subscription: "sub-a"}, 3},
			{ledger.ResolvedFilter{Subscription: "sub-a", AggregateType: "order", AggregateID: "o-1"}, 2},
			{ledger.ResolvedFilter{Subscription: "sub-b", AggregateType: "invoice"}, 0},
		} {
			var got []*ledger.Resolved
			f := tc.f
			f.Limit = 1
			for {
				page, next, err := tx.ListResolved(f)
				if err != nil {
					t.Fatalf("ListResolved(%+v): %v", f, err)
				}
				got = append(got, page...)
				if next == "" {
					break
				}
				f.After = next
			}
			if len(got) != tc.want {
				t.Errorf("ListResolved(%+v): %d, want %d", tc.f, len(got), tc.want)
			}
		}
		one, _, _ := tx.ListResolved(ledger.ResolvedFilter{Subscription: "sub-a", AggregateType: "order", AggregateID: "o-1"})
		if len(one) != 2 || !one[0].ResolvedAt.Equal(base()) || !one[1].ResolvedAt.Equal(base().Add(time.Hour)) ||
			one[0].Seq >= one[1].Seq || one[0].Attempts != 5 || one[0].Error.Message != "mail service down" ||
			one[0].History[len(one[0].History)-1].Actor != "ops" {
			t.Errorf("o-1's resolved records: %+v", one)
		}
		if _, _, err := tx.ListResolved(ledger.ResolvedFilter{AggregateType: "order"}); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("a type without a subscription: %v, want ErrInvalid", err)
		}
		if _, _, err := tx.ListResolved(ledger.ResolvedFilter{After: "!!"}); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("a bad cursor: %v, want ErrInvalid", err)
		}
		return nil
	})
	for more := true; more; {
		update(t, s, func(tx ledger.Tx) error {
			var err error
			more, err = tx.SweepResolved(base().Add(90*time.Minute), 1)
			return err
		})
	}
	view(t, s, func(tx ledger.Tx) error {
		left, _, _ := tx.ListResolved(ledger.ResolvedFilter{})
		if len(left) != 2 {
			t.Errorf("after the sweep: %d resolved, want 2 (those resolved at 2h and 3h)", len(left))
		}
		return nil
	})
}
