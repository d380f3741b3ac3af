package ledgertest

import (
	"testing"
	"time"

	"github.com/berthhq/berth/ledger"
)

func seqs(ns []ledger.Notification) []uint64 {
	out := make([]uint64, len(ns))
	for i, n := range ns {
		out[i] = n.Seq
	}
	return out
}

func equalU64(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func notifications(t *testing.T, s ledger.Store, after uint64, limit int) []ledger.Notification {
	t.Helper()
	var ns []ledger.Notification
	view(t, s, func(tx ledger.Tx) (err error) {
		ns, err = tx.Notifications(after, limit)
		return err
	})
	return ns
}

func notify(t *testing.T, s ledger.Store, n ...ledger.Notification) {
	t.Helper()
	update(t, s, func(tx ledger.Tx) error {
		for _, n := range n {
			if err := tx.Notify(n); err != nil {
				return err
			}
		}
		return nil
	})
}

func testNotifications(t *testing.T, open Opener) {
	s := openNew(t, open)
	when := base()
	full := ledger.Notification{
		Seq: 999, Type: "parked", Time: when, Subscription: "sub-a", AggregateType: "order", AggregateID: "o-1",
		Version: 7, Error: &ledger.ErrorInfo{Message: "down", Kind: "recoverable"}, Actor: "ops", Reason: "why",
	}
	notify(t, s, full, ledger.Notification{Type: "retries-spent"})
	notify(t, s, ledger.Notification{Type: "resumed"})
	ns := notifications(t, s, 0, 0)
	if !equalU64(seqs(ns), []uint64{1, 2, 3}) {
		t.Fatalf("Seqs %v, want 1 2 3 (the store assigns them)", seqs(ns))
	}
	want := full
	want.Seq = 1
	if got := ns[0]; got.Type != want.Type || !got.Time.Equal(want.Time) || got.AggregateID != want.AggregateID ||
		got.Version != 7 || got.Error == nil || got.Error.Message != "down" || got.Actor != "ops" || got.Reason != "why" {
		t.Fatalf("notification read back as %+v, want %+v", got, want)
	}
	if ns[1].Time.IsZero() || time.Since(ns[1].Time) > time.Minute {
		t.Errorf("a zero Time was stored as %v, want now", ns[1].Time)
	}
	for _, c := range []struct {
		after uint64
		limit int
		want  []uint64
	}{{1, 0, []uint64{2, 3}}, {1, 1, []uint64{2}}, {3, 0, nil}, {^uint64(0), 0, nil}} {
		if got := seqs(notifications(t, s, c.after, c.limit)); !equalU64(got, c.want) {
			t.Errorf("Notifications(%d, %d) = %v, want %v", c.after, c.limit, got, c.want)
		}
	}
	update(t, s, func(tx ledger.Tx) error { return tx.AckNotifications(2) })
	if got := seqs(notifications(t, s, 0, 0)); !equalU64(got, []uint64{3}) {
		t.Fatalf("after Ack(2): %v, want [3]", got)
	}
	update(t, s, func(tx ledger.Tx) error { return tx.AckNotifications(100) })
	if got := notifications(t, s, 0, 0); len(got) != 0 {
		t.Fatalf("after Ack(100): %v", seqs(got))
	}
	// Seq goes on after everything was acked.
	notify(t, s, ledger.Notification{Type: "skipped"})
	if got := seqs(notifications(t, s, 0, 0)); !equalU64(got, []uint64{4}) {
		t.Fatalf("after acking all: %v, want [4]", got)
	}
	// Acking nothing is fine.
	update(t, s, func(tx ledger.Tx) error { return tx.AckNotifications(0) })
	if got := seqs(notifications(t, s, 0, 0)); !equalU64(got, []uint64{4}) {
		t.Fatalf("after Ack(0): %v, want [4]", got)
	}
}

// testReopen: everything survives Close, and Seq goes on from where it was.
func testReopen(t *testing.T, open Opener) {
	name := t.TempDir()
	s := openAt(t, open, name)
	all := listFixture(t, s)
	// The fixture's parks opened failure groups: their notifications
	// came first.
	q := uint64(len(notifications(t, s, 0, 0)))
	update(t, s, func(tx ledger.Tx) error {
		return errorsJoin(
			tx.SetCheckpoint("sub-a", 41),
			tx.SetMeta("sub-a", "paused", []byte("true")),
			tx.Notify(ledger.Notification{Type: "parked"}),
			tx.Notify(ledger.Notification{Type: "parked"}),
		)
	})
	update(t, s, func(tx ledger.Tx) error { return tx.AckNotifications(q + 2) })
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, open, name)
	view(t, s, func(tx ledger.Tx) error {
		if p, ok, err := tx.Checkpoint("sub-a"); p != 41 || !ok || err != nil {
			t.Errorf("checkpoint after reopen: %d %v %v", p, ok, err)
		}
		if v, err := tx.Meta("sub-a", "paused"); string(v) != "true" || err != nil {
			t.Errorf("meta after reopen: %q %v", v, err)
		}
		for _, r := range all {
			got, err := tx.Parked(r.Subscription, r.AggregateType, r.AggregateID)
			if err != nil || sameRecord(got, r) != "" {
				t.Fatalf("record %s after reopen: %v %s", r.AggregateID, err, sameRecord(got, r))
			}
		}
		if c, _ := tx.CountParked("sub-a"); c[ledger.StateWaiting] != 4 {
			t.Errorf("counts after reopen: %v", c)
		}
		if rs, _, _ := tx.ListParked(ledger.Filter{State: ledger.StateRetrying}); len(rs) != 8 {
			t.Errorf("%d retrying after reopen, want 8", len(rs))
		}
		return nil
	})
	notify(t, s, ledger.Notification{Type: "parked"})
	if got := seqs(notifications(t, s, 0, 0)); !equalU64(got, []uint64{q + 3}) {
		t.Fatalf("Seqs after reopen: %v, want [%d]", got, q+3)
	}
}

func errorsJoin(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
