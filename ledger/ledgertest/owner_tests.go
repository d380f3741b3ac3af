package ledgertest

import (
	"context"
	"errors"
	"testing"

	"github.com/berthhq/berth/ledger"
)

// testPartitionOwner: a claim needs a later epoch, and Fence fails a whole
// transaction for anyone but the current owner at its epoch.
func testPartitionOwner(t *testing.T, open Opener) {
	s := openNew(t, open)
	ctx := context.Background()
	view(t, s, func(tx ledger.Tx) error {
		if h, e, err := tx.PartitionOwner("sub-a", 2); err != nil || h != "" || e != 0 {
			t.Fatalf("owner of an unclaimed partition = %q, %d, %v", h, e, err)
		}
		return nil
	})
	update(t, s, func(tx ledger.Tx) error { return tx.ClaimPartition("sub-a", 2, "host-a", 1) })
	update(t, s, func(tx ledger.Tx) error {
		if err := tx.Fence("sub-a", 2, "host-a", 1); err != nil {
			t.Fatalf("the owner's fence: %v", err)
		}
		return tx.SetPartitionCheckpoint("sub-a", 2, 10)
	})

	// Another host takes it over at a later epoch; an equal or older claim fails.
	for _, e := range []uint64{1, 0} {
		err := s.Update(ctx, func(tx ledger.Tx) error { return tx.ClaimPartition("sub-a", 2, "host-b", e) })
		if !errors.Is(err, ledger.ErrFenced) {
			t.Errorf("claim at epoch %d over epoch 1: %v, want ErrFenced", e, err)
		}
	}
	update(t, s, func(tx ledger.Tx) error { return tx.ClaimPartition("sub-a", 2, "host-b", 2) })

	// The old owner's transaction is fenced off whole, even if its closure
	// ignores the error; the new owner's goes through.
	err := s.Update(ctx, func(tx ledger.Tx) error {
		_ = tx.Fence("sub-a", 2, "host-a", 1)
		return tx.SetPartitionCheckpoint("sub-a", 2, 99)
	})
	if !errors.Is(err, ledger.ErrFenced) {
		t.Fatalf("the old owner's write: %v, want ErrFenced", err)
	}
	for _, who := range []struct {
		host  string
		epoch uint64
	}{{"host-a", 2}, {"host-b", 1}, {"host-b", 3}} {
		err := s.Update(ctx, func(tx ledger.Tx) error { return tx.Fence("sub-a", 2, who.host, who.epoch) })
		if !errors.Is(err, ledger.ErrFenced) {
			t.Errorf("fence as %s at %d: %v, want ErrFenced", who.host, who.epoch, err)
		}
	}
	update(t, s, func(tx ledger.Tx) error {
		if err := tx.Fence("sub-a", 2, "host-b", 2); err != nil {
			return err
		}
		return tx.SetPartitionCheckpoint("sub-a", 2, 20)
	})
	view(t, s, func(tx ledger.Tx) error {
		if h, e, _ := tx.PartitionOwner("sub-a", 2); h != "host-b" || e != 2 {
			t.Errorf("owner = %q at %d, want host-b at 2", h, e)
		}
		if p, _, _ := tx.PartitionCheckpoint("sub-a", 2); p != 20 {
			t.Errorf("checkpoint = %d, want 20 (the fenced write of 99 must not land)", p)
		}
		// Partitions and subscriptions are apart.
		if h, _, _ := tx.PartitionOwner("sub-a", 3); h != "" {
			t.Errorf("partition 3 owned by %q", h)
		}
		if h, _, _ := tx.PartitionOwner("sub-b", 2); h != "" {
			t.Errorf("sub-b partition 2 owned by %q", h)
		}
		return nil
	})
	for _, bad := range []func(tx ledger.Tx) error{
		func(tx ledger.Tx) error { return tx.ClaimPartition("", 0, "h", 1) },
		func(tx ledger.Tx) error { return tx.ClaimPartition("sub-a", 0, "", 1) },
		func(tx ledger.Tx) error { return tx.ClaimPartition("sub-a", -1, "h", 1) },
	} {
		if err := s.Update(ctx, bad); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("bad claim: %v, want ErrInvalid", err)
		}
	}
}

// testDutyHolder: a duty's claim needs a later epoch, FenceDuty fails a
// whole transaction for anyone but the holder at its epoch, duties are
// apart from each other and from partitions, the zero DutyFence holds, and
// TakeDuty claims at the next epoch.
func testDutyHolder(t *testing.T, open Opener) {
	s := openNew(t, open)
	ctx := context.Background()
	view(t, s, func(tx ledger.Tx) error {
		if h, e, err := tx.DutyHolder("jobs"); err != nil || h != "" || e != 0 {
			t.Fatalf("holder of an unclaimed duty = %q, %d, %v", h, e, err)
		}
		return nil
	})
	a := ledger.DutyFence{Duty: "jobs", Host: "host-a", Epoch: 1}
	update(t, s, func(tx ledger.Tx) error { return tx.ClaimDuty("jobs", "host-a", 1) })
	update(t, s, func(tx ledger.Tx) error {
		if err := a.Check(tx); err != nil {
			t.Fatalf("the holder's fence: %v", err)
		}
		return tx.SetMeta("~jobs", "k", []byte("a"))
	})
	for _, e := range []uint64{1, 0} {
		err := s.Update(ctx, func(tx ledger.Tx) error { return tx.ClaimDuty("jobs", "host-b", e) })
		if !errors.Is(err, ledger.ErrFenced) {
			t.Errorf("claim at epoch %d over epoch 1: %v, want ErrFenced", e, err)
		}
	}
	b := ledger.DutyFence{Duty: "jobs", Host: "host-b", Epoch: 2}
	update(t, s, func(tx ledger.Tx) error { return tx.ClaimDuty(b.Duty, b.Host, b.Epoch) })

	// The old holder's write is fenced off whole, even if its closure
	// ignores the error; a check alone fails too, in an Update or a View
	// (the webhooks' before a send); the new holder's goes through.
	err := s.Update(ctx, func(tx ledger.Tx) error {
		_ = a.Check(tx)
		return tx.SetMeta("~jobs", "k", []byte("late"))
	})
	if !errors.Is(err, ledger.ErrFenced) {
		t.Fatalf("the old holder's write: %v, want ErrFenced", err)
	}
	if err := s.Update(ctx, a.Check); !errors.Is(err, ledger.ErrFenced) {
		t.Fatalf("the old holder's check: %v, want ErrFenced", err)
	}
	if err := s.View(ctx, a.Check); !errors.Is(err, ledger.ErrFenced) {
		t.Fatalf("the old holder's check in a View: %v, want ErrFenced", err)
	}
	if err := s.View(ctx, b.Check); err != nil {
		t.Fatalf("the new holder's check in a View: %v", err)
	}
	for _, f := range []ledger.DutyFence{
		{Duty: "jobs", Host: "host-a", Epoch: 2}, {Duty: "jobs", Host: "host-b", Epoch: 1},
		{Duty: "jobs", Host: "host-b", Epoch: 3}, {Duty: "webhooks", Host: "host-b", Epoch: 2},
	} {
		if err := s.Update(ctx, f.Check); !errors.Is(err, ledger.ErrFenced) {
			t.Errorf("fence %+v: %v, want ErrFenced", f, err)
		}
	}
	update(t, s, func(tx ledger.Tx) error {
		if err := b.Check(tx); err != nil {
			return err
		}
		return tx.SetMeta("~jobs", "k", []byte("b"))
	})
	update(t, s, func(tx ledger.Tx) error { return ledger.DutyFence{}.Check(tx) })
	view(t, s, func(tx ledger.Tx) error {
		if h, e, _ := tx.DutyHolder("jobs"); h != "host-b" || e != 2 {
			t.Errorf("holder = %q at %d, want host-b at 2", h, e)
		}
		if v, _ := tx.Meta("~jobs", "k"); string(v) != "b" {
			t.Errorf("meta = %q, want b (the fenced write must not land)", v)
		}
		// Duties are apart from each other and from partitions.
		if h, _, _ := tx.DutyHolder("webhooks"); h != "" {
			t.Errorf("webhooks held by %q", h)
		}
		if h, _, _ := tx.PartitionOwner("jobs", 0); h != "" {
			t.Errorf("partition jobs/0 owned by %q", h)
		}
		return nil
	})
	// TakeDuty claims at the next epoch, whoever held it.
	if f, was, err := ledger.TakeDuty(ctx, s, "jobs", "host-c"); err != nil || was != "host-b" ||
		f != (ledger.DutyFence{Duty: "jobs", Host: "host-c", Epoch: 3}) {
		t.Fatalf("TakeDuty = %+v, %q, %v; want host-c at 3, from host-b", f, was, err)
	}
	if err := s.Update(ctx, b.Check); !errors.Is(err, ledger.ErrFenced) {
		t.Fatalf("host-b's check after host-c took the duty: %v, want ErrFenced", err)
	}
	for _, bad := range []func(tx ledger.Tx) error{
		func(tx ledger.Tx) error { return tx.ClaimDuty("", "h", 1) },
		func(tx ledger.Tx) error { return tx.ClaimDuty("jobs", "", 9) },
	} {
		if err := s.Update(ctx, bad); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("bad claim: %v, want ErrInvalid", err)
		}
	}
}
