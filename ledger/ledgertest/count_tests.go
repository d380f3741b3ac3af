package ledgertest

import (
	"testing"
	"time"

	"github.com/berthhq/berth/ledger"
)

func testCount(t *testing.T, open Opener) {
	s := openNew(t, open)
	count := func(sub string) map[ledger.State]int {
		var c map[ledger.State]int
		view(t, s, func(tx ledger.Tx) (err error) {
			c, err = tx.CountParked(sub)
			return err
		})
		return c
	}
	if c := count("sub-a"); len(c) != 0 {
		t.Fatalf("counts of an empty ledger: %v", c)
	}
	listFixture(t, s)
	for _, sub := range []string{"sub-a", "sub-b"} {
		c := count(sub)
		if c[ledger.StateRetrying] != 4 || c[ledger.StateWaiting] != 4 || c[ledger.StateResuming] != 4 || len(c) != 3 {
			t.Fatalf("counts of %s: %v, want 4 of each", sub, c)
		}
	}
	// Changing a state moves the count; putting again does not double it;
	// deleting lowers it.
	update(t, s, func(tx ledger.Tx) error {
		r, err := tx.Parked("sub-a", "order", "order-0") // retrying
		if err != nil {
			return err
		}
		r.State, r.NextRetry = ledger.StateWaiting, time.Time{}
		if err := tx.PutParked(r); err != nil {
			return err
		}
		if err := tx.PutParked(r); err != nil {
			return err
		}
		return tx.DeleteParked("sub-a", "order", "order-2") // resuming
	})
	c := count("sub-a")
	if c[ledger.StateRetrying] != 3 || c[ledger.StateWaiting] != 5 || c[ledger.StateResuming] != 3 {
		t.Fatalf("counts of sub-a after changes: %v, want 3 retrying, 5 waiting, 3 resuming", c)
	}
	if c := count("sub-b"); c[ledger.StateRetrying] != 4 {
		t.Fatalf("sub-b's counts changed with sub-a's: %v", c)
	}
	if c := count("sub-c"); len(c) != 0 {
		t.Fatalf("counts of an unknown subscription: %v", c)
	}
}

func testHistory(t *testing.T, open Opener) {
	s := openNew(t, open)
	r := rec("sub-a", "order", "o-1", ledger.StateRetrying, 0)
	for i := range 2 * ledger.MaxHistory {
		r.AddHistory(ledger.Entry{Time: base().Add(time.Duration(i) * time.Second), Action: "retry", Attempt: i + 2, Reason: "again"})
	}
	if len(r.History) != ledger.MaxHistory || r.History[0].Action != "parked" {
		t.Fatalf("AddHistory kept %d entries, the first %q", len(r.History), r.History[0].Action)
	}
	put(t, s, r)
	view(t, s, func(tx ledger.Tx) error {
		got, err := tx.Parked("sub-a", "order", "o-1")
		if err != nil {
			return err
		}
		if d := sameRecord(got, r); d != "" {
			t.Fatalf("record with a full history: %s", d)
		}
		return nil
	})
}
