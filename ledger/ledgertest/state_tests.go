package ledgertest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/berthhq/berth/ledger"
)

func testCheckpoint(t *testing.T, open Opener) {
	s := openNew(t, open)
	view(t, s, func(tx ledger.Tx) error {
		if p, ok, err := tx.Checkpoint("sub-a"); err != nil || ok || p != 0 {
			t.Fatalf("Checkpoint of a new subscription = %d, %v, %v; want 0, false, nil", p, ok, err)
		}
		return nil
	})
	for _, pos := range []uint64{5, 7, 0, 1 << 62} {
		update(t, s, func(tx ledger.Tx) error { return tx.SetCheckpoint("sub-a", pos) })
		view(t, s, func(tx ledger.Tx) error {
			if p, ok, err := tx.Checkpoint("sub-a"); err != nil || !ok || p != pos {
				t.Fatalf("Checkpoint = %d, %v, %v; want %d, true, nil", p, ok, err, pos)
			}
			if _, ok, _ := tx.Checkpoint("sub-b"); ok {
				t.Fatal("sub-b has a checkpoint it was never given")
			}
			return nil
		})
	}
	// A write is visible to reads later in the same transaction.
	update(t, s, func(tx ledger.Tx) error {
		if err := tx.SetCheckpoint("sub-b", 3); err != nil {
			return err
		}
		if p, ok, err := tx.Checkpoint("sub-b"); err != nil || !ok || p != 3 {
			t.Fatalf("Checkpoint in the writing transaction = %d, %v, %v", p, ok, err)
		}
		return nil
	})
}

// testPartitionCheckpoint: each partition of each subscription keeps its own
// checkpoint, apart from the subscription's.
func testPartitionCheckpoint(t *testing.T, open Opener) {
	s := openNew(t, open)
	update(t, s, func(tx ledger.Tx) error {
		if _, ok, err := tx.PartitionCheckpoint("sub-a", 0); err != nil || ok {
			t.Fatalf("PartitionCheckpoint of a new subscription: ok %v, err %v", ok, err)
		}
		for p, pos := range []uint64{4, 0, 1 << 62} {
			if err := tx.SetPartitionCheckpoint("sub-a", p, pos); err != nil {
				return err
			}
		}
		if err := tx.SetPartitionCheckpoint("sub-b", 1, 9); err != nil {
			return err
		}
		return tx.SetCheckpoint("sub-a", 2)
	})
	view(t, s, func(tx ledger.Tx) error {
		for p, want := range []uint64{4, 0, 1 << 62} {
			if got, ok, err := tx.PartitionCheckpoint("sub-a", p); err != nil || !ok || got != want {
				t.Errorf("sub-a partition %d = %d, %v, %v; want %d, true, nil", p, got, ok, err, want)
			}
		}
		if _, ok, _ := tx.PartitionCheckpoint("sub-a", 3); ok {
			t.Error("sub-a partition 3 has a checkpoint it was never given")
		}
		if got, ok, _ := tx.PartitionCheckpoint("sub-b", 1); !ok || got != 9 {
			t.Errorf("sub-b partition 1 = %d, %v; want 9", got, ok)
		}
		if _, ok, _ := tx.PartitionCheckpoint("sub-b", 0); ok {
			t.Error("sub-b partition 0 has a checkpoint it was never given")
		}
		if got, _, _ := tx.Checkpoint("sub-a"); got != 2 {
			t.Errorf("sub-a's own checkpoint = %d, want 2 (partitions apart)", got)
		}
		if _, _, err := tx.PartitionCheckpoint("sub-a", -1); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("negative partition: %v, want ErrInvalid", err)
		}
		return nil
	})
	err := s.Update(context.Background(), func(tx ledger.Tx) error { return tx.SetPartitionCheckpoint("", 0, 1) })
	if !errors.Is(err, ledger.ErrInvalid) {
		t.Errorf("SetPartitionCheckpoint without a subscription: %v, want ErrInvalid", err)
	}
	err = s.Update(context.Background(), func(tx ledger.Tx) error { return tx.SetPartitionCheckpoint("sub-a", -2, 1) })
	if !errors.Is(err, ledger.ErrInvalid) {
		t.Errorf("SetPartitionCheckpoint of a negative partition: %v, want ErrInvalid", err)
	}
}

func testMeta(t *testing.T, open Opener) {
	s := openNew(t, open)
	view(t, s, func(tx ledger.Tx) error {
		if _, err := tx.Meta("sub-a", "paused"); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("Meta of nothing: %v, want ErrNotFound", err)
		}
		return nil
	})
	update(t, s, func(tx ledger.Tx) error {
		return errors.Join(
			tx.SetMeta("sub-a", "paused", []byte("true")),
			tx.SetMeta("sub-a", "paused", []byte("false")),
			tx.SetMeta("sub-a", "note", []byte{}),
			tx.SetMeta("sub-b", "paused", []byte("yes")),
		)
	})
	view(t, s, func(tx ledger.Tx) error {
		for _, c := range []struct{ sub, key, want string }{
			{"sub-a", "paused", "false"}, {"sub-a", "note", ""}, {"sub-b", "paused", "yes"},
		} {
			v, err := tx.Meta(c.sub, c.key)
			if err != nil || string(v) != c.want {
				t.Errorf("Meta(%s, %s) = %q, %v; want %q", c.sub, c.key, v, err, c.want)
			}
		}
		if _, err := tx.Meta("sub-b", "note"); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("Meta(sub-b, note): %v, want ErrNotFound", err)
		}
		return nil
	})
	update(t, s, func(tx ledger.Tx) error {
		return errors.Join(tx.DeleteMeta("sub-a", "paused"), tx.DeleteMeta("sub-a", "never-set"))
	})
	view(t, s, func(tx ledger.Tx) error {
		if _, err := tx.Meta("sub-a", "paused"); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("Meta(sub-a, paused) after DeleteMeta: %v, want ErrNotFound", err)
		}
		if v, err := tx.Meta("sub-b", "paused"); err != nil || string(v) != "yes" {
			t.Errorf("DeleteMeta removed another subscription's value: %q, %v", v, err)
		}
		return nil
	})
}

// testRollback: a closure that fails leaves nothing of what it wrote, and
// the outbox's Seq it took is given out again.
func testRollback(t *testing.T, open Opener) {
	s := openNew(t, open)
	update(t, s, func(tx ledger.Tx) error { return tx.SetCheckpoint("sub-a", 1) })
	boom := errors.New("boom")
	err := s.Update(context.Background(), func(tx ledger.Tx) error {
		if err := errors.Join(
			tx.SetCheckpoint("sub-a", 99),
			tx.SetMeta("sub-a", "paused", []byte("true")),
			tx.PutParked(rec("sub-a", "order", "o-1", ledger.StateRetrying, 0)),
			tx.Notify(ledger.Notification{Type: "parked", Subscription: "sub-a"}),
		); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Update returned %v, want the closure's error", err)
	}
	view(t, s, func(tx ledger.Tx) error {
		if p, _, _ := tx.Checkpoint("sub-a"); p != 1 {
			t.Errorf("checkpoint %d after rollback, want 1", p)
		}
		if _, err := tx.Meta("sub-a", "paused"); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("meta after rollback: %v, want ErrNotFound", err)
		}
		if _, err := tx.Parked("sub-a", "order", "o-1"); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("record after rollback: %v, want ErrNotFound", err)
		}
		if rs, _, _ := tx.ListParked(ledger.Filter{State: ledger.StateRetrying}); len(rs) != 0 {
			t.Errorf("retrying records after rollback: %v", ids(rs))
		}
		if c, _ := tx.CountParked("sub-a"); len(c) != 0 {
			t.Errorf("counts after rollback: %v", c)
		}
		if ns, _ := tx.Notifications(0, 0); len(ns) != 0 {
			t.Errorf("notifications after rollback: %v", ns)
		}
		return nil
	})
	update(t, s, func(tx ledger.Tx) error { return tx.Notify(ledger.Notification{Type: "parked"}) })
	view(t, s, func(tx ledger.Tx) error {
		if ns, _ := tx.Notifications(0, 0); len(ns) != 1 || ns[0].Seq != 1 {
			t.Errorf("first notification after rollback: %+v, want Seq 1", ns)
		}
		return nil
	})
}

func testViewReadOnly(t *testing.T, open Opener) {
	s := openNew(t, open)
	put(t, s, rec("sub-a", "order", "o-1", ledger.StateWaiting, 0))
	update(t, s, func(tx ledger.Tx) error { return tx.Notify(ledger.Notification{Type: "parked"}) })
	writes := map[string]func(tx ledger.Tx) error{
		"SetCheckpoint":    func(tx ledger.Tx) error { return tx.SetCheckpoint("sub-a", 1) },
		"SetMeta":          func(tx ledger.Tx) error { return tx.SetMeta("sub-a", "k", []byte("v")) },
		"PutParked":        func(tx ledger.Tx) error { return tx.PutParked(rec("sub-a", "order", "o-2", ledger.StateWaiting, 0)) },
		"DeleteParked":     func(tx ledger.Tx) error { return tx.DeleteParked("sub-a", "order", "o-1") },
		"Notify":           func(tx ledger.Tx) error { return tx.Notify(ledger.Notification{Type: "parked"}) },
		"AckNotifications": func(tx ledger.Tx) error { return tx.AckNotifications(1) },
	}
	for name, w := range writes {
		err := s.View(context.Background(), w)
		if !errors.Is(err, ledger.ErrReadOnly) {
			t.Errorf("%s in View: %v, want ErrReadOnly", name, err)
		}
	}
	view(t, s, func(tx ledger.Tx) error {
		if _, ok, _ := tx.Checkpoint("sub-a"); ok {
			t.Error("a checkpoint was written in View")
		}
		if _, err := tx.Meta("sub-a", "k"); !errors.Is(err, ledger.ErrNotFound) {
			t.Error("meta was written in View")
		}
		if _, err := tx.Parked("sub-a", "order", "o-1"); err != nil {
			t.Errorf("record deleted in View: %v", err)
		}
		if _, err := tx.Parked("sub-a", "order", "o-2"); !errors.Is(err, ledger.ErrNotFound) {
			t.Error("a record was written in View")
		}
		ns, _ := tx.Notifications(0, 0)
		ns = slices.DeleteFunc(ns, func(n ledger.Notification) bool { return n.Group != "" }) // the parks' groups
		if len(ns) != 1 {
			t.Errorf("%d notifications after writes in View, want 1", len(ns))
		}
		return nil
	})
}

// testConcurrentUpdates: read-modify-write transactions running at once
// each see the others' commits (no lost update).
func testConcurrentUpdates(t *testing.T, open Opener) {
	s := openNew(t, open)
	const workers, each = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, (workers+2)*each)
	for range workers {
		wg.Go(func() {
			for range each {
				errs <- s.Update(context.Background(), func(tx ledger.Tx) error {
					p, _, err := tx.Checkpoint("sub-a")
					if err != nil {
						return err
					}
					if err := tx.Notify(ledger.Notification{Type: "parked"}); err != nil {
						return err
					}
					return tx.SetCheckpoint("sub-a", p+1)
				})
			}
		})
	}
	// Readers run alongside.
	for range 2 {
		wg.Go(func() {
			for range each {
				errs <- s.View(context.Background(), func(tx ledger.Tx) error {
					_, err := tx.Notifications(0, 10)
					return err
				})
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent transaction: %v", err)
		}
	}
	view(t, s, func(tx ledger.Tx) error {
		if p, _, _ := tx.Checkpoint("sub-a"); p != workers*each {
			t.Errorf("checkpoint %d after %d increments", p, workers*each)
		}
		ns, _ := tx.Notifications(0, workers*each+10)
		if len(ns) != workers*each {
			t.Fatalf("%d notifications, want %d", len(ns), workers*each)
		}
		for i, n := range ns {
			if n.Seq != uint64(i+1) {
				t.Fatalf("notification %d has Seq %d", i, n.Seq)
			}
		}
		return nil
	})
}

func testCanceled(t *testing.T, open Opener) {
	s := openNew(t, open)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Update(ctx, func(tx ledger.Tx) error { return tx.SetCheckpoint("sub-a", 1) }); !errors.Is(err, context.Canceled) {
		t.Fatalf("Update with a canceled context: %v", err)
	}
	// Canceled while the closure runs: nothing is committed.
	ctx, cancel = context.WithCancel(context.Background())
	err := s.Update(ctx, func(tx ledger.Tx) error {
		cancel()
		return tx.SetCheckpoint("sub-a", 2)
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Update canceled in its closure: %v", err)
	}
	view(t, s, func(tx ledger.Tx) error {
		if _, ok, _ := tx.Checkpoint("sub-a"); ok {
			t.Error("a canceled Update committed")
		}
		return nil
	})
}

func testClosed(t *testing.T, open Opener) {
	s := openNew(t, open)
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(context.Background(), func(tx ledger.Tx) error { return nil }); !errors.Is(err, ledger.ErrClosed) {
		t.Errorf("Update after Close: %v, want ErrClosed", err)
	}
	if err := s.View(context.Background(), func(tx ledger.Tx) error { return nil }); !errors.Is(err, ledger.ErrClosed) {
		t.Errorf("View after Close: %v, want ErrClosed", err)
	}
}
