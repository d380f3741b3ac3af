package ledgertest

import (
	"fmt"
	"testing"
	"time"

	"github.com/berthhq/berth/ledger"
)

// due lists the ids of DueParked(at, limit).
func due(t *testing.T, s ledger.Store, at time.Time, limit int) []string {
	t.Helper()
	var out []string
	view(t, s, func(tx ledger.Tx) error {
		rs, err := tx.DueParked(at, limit)
		for _, r := range rs {
			if r.State != ledger.StateRetrying || r.NextRetry.After(at) {
				t.Errorf("DueParked(%v) returned %s in %s due %v", at, r.AggregateID, r.State, r.NextRetry)
			}
		}
		out = ids(rs)
		return err
	})
	return out
}

func testDue(t *testing.T, open Opener) {
	s := openNew(t, open)
	at := func(d time.Duration) time.Time { return base().Add(d) }
	put(t, s,
		rec("sub-a", "order", "o-3", ledger.StateRetrying, 3*time.Minute),
		rec("sub-a", "order", "o-1", ledger.StateRetrying, 1*time.Minute),
		rec("sub-b", "order", "o-2", ledger.StateRetrying, 2*time.Minute),
		rec("sub-a", "order", "o-w", ledger.StateWaiting, 0),
		rec("sub-a", "order", "o-r", ledger.StateResuming, 0),
		rec("sub-a", "order", "o-past", ledger.StateRetrying, -24*time.Hour*365*60), // before 1970
	)
	past, o1, o2, o3 := "sub-a/order/o-past", "sub-a/order/o-1", "sub-b/order/o-2", "sub-a/order/o-3"
	tests := []struct {
		at    time.Time
		limit int
		want  []string
	}{
		{at(0), 0, []string{past}},
		{at(time.Minute - 1), 0, []string{past}},
		{at(time.Minute), 0, []string{past, o1}},
		{at(2 * time.Minute), 0, []string{past, o1, o2}},
		{at(time.Hour), 0, []string{past, o1, o2, o3}},
		{at(time.Hour), 2, []string{past, o1}},
		{time.Time{}, 0, nil},
	}
	for _, tc := range tests {
		if got := due(t, s, tc.at, tc.limit); !equalStrings(got, tc.want) {
			t.Errorf("DueParked(%v, %d) = %v, want %v", tc.at, tc.limit, got, tc.want)
		}
	}

	// Moving o-1's retry later moves it in the index.
	update(t, s, func(tx ledger.Tx) error {
		r, err := tx.Parked("sub-a", "order", "o-1")
		if err != nil {
			return err
		}
		r.NextRetry = at(10 * time.Minute)
		return tx.PutParked(r)
	})
	if got, want := due(t, s, at(time.Hour), 0), []string{past, o2, o3, o1}; !equalStrings(got, want) {
		t.Fatalf("after moving o-1: %v, want %v", got, want)
	}
	if got, want := due(t, s, at(2*time.Minute), 0), []string{past, o2}; !equalStrings(got, want) {
		t.Fatalf("after moving o-1, at +2m: %v, want %v", got, want)
	}
	// A record leaving StateRetrying leaves the index; one entering it joins.
	update(t, s, func(tx ledger.Tx) error {
		r, err := tx.Parked("sub-b", "order", "o-2")
		if err != nil {
			return err
		}
		r.State, r.NextRetry = ledger.StateWaiting, time.Time{}
		if err := tx.PutParked(r); err != nil {
			return err
		}
		w, err := tx.Parked("sub-a", "order", "o-w")
		if err != nil {
			return err
		}
		w.State, w.NextRetry = ledger.StateRetrying, at(5*time.Minute)
		return tx.PutParked(w)
	})
	if got, want := due(t, s, at(time.Hour), 0), []string{past, o3, "sub-a/order/o-w", o1}; !equalStrings(got, want) {
		t.Fatalf("after state changes: %v, want %v", got, want)
	}
	// Deleting a record removes its index entry.
	update(t, s, func(tx ledger.Tx) error {
		return tx.DeleteParked("sub-a", "order", "o-past")
	})
	if got, want := due(t, s, at(time.Hour), 0), []string{o3, "sub-a/order/o-w", o1}; !equalStrings(got, want) {
		t.Fatalf("after delete: %v, want %v", got, want)
	}
	// Records due at the same instant all come, none twice.
	var same []*ledger.Record
	for i := range 5 {
		same = append(same, rec(fmt.Sprintf("sub-%d", i), "order", "same", ledger.StateRetrying, 30*time.Second))
	}
	put(t, s, same...)
	if got := due(t, s, at(30*time.Second), 0); len(got) != 5 {
		t.Fatalf("records due at the same instant: %v", got)
	}
	// Putting the same record again does not duplicate its entry.
	put(t, s, same[0], same[0])
	if got := due(t, s, at(30*time.Second), 0); len(got) != 5 {
		t.Fatalf("after putting a record twice: %v", got)
	}
}

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
