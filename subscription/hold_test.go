package subscription

import (
	"context"
	"errors"
	"fmt"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"slices"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/clock"
	"github.com/berthhq/berth/ledger"
)

// TestHoldKeepsTheRunStopped: a held subscription runs no partition —
// whatever Own says meanwhile, and Reset refuses it — until its last hold
// is lifted; ResetHeld's guard can refuse the write (nothing changes), and
// its write makes the run start from the position once unheld.
func TestHoldKeepsTheRunStopped(t *testing.T) {
	rec := newRecorder(clock.NewFake(t0), nil)
	opts := Options{Partitions: 2}
	e := newEnv(t, opts)
	eng := e.host("A", opts, spec(sub, rec))
	own(t, eng, e.claim("A", 1, 0, 1))
	e.append("Order", "o1")
	rec.waitHandled(t, "o1", 1)
	ctx := context.Background()

	for _, id := range []string{"r1", "r2", "r1"} {
		if err := eng.Hold(ctx, sub, id); err != nil {
			t.Fatal(err)
		}
	}
	if st, _ := eng.Status(ctx, sub); st.State != StateStopped {
		t.Fatalf("held: %s", st.State)
	}
	own(t, eng, e.claim("A", 2, 0, 1))
	if st, _ := eng.Status(ctx, sub); st.State != StateStopped {
		t.Fatalf("held, told to own anew: %s", st.State)
	}
	if err := eng.Reset(ctx, sub, 1, Caller{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Reset of a held subscription: %v", err)
	}
	refuse := errors.New("an owner is not holding")
	if err := eng.ResetHeld(ctx, sub, 1, func(ledger.Tx) error { return refuse }, Caller{}); !errors.Is(err, refuse) {
		t.Fatalf("ResetHeld with a refusing guard: %v", err)
	}
	if cps, _, _ := e.partitionCheckpoints(2); slices.Contains(cps, 1) {
		t.Fatalf("a refused reset moved checkpoints: %v", cps)
	}
	if err := eng.ResetHeld(ctx, sub, 1, func(ledger.Tx) error { return nil }, Caller{}); err != nil {
		t.Fatal(err)
	}
	if err := eng.Unhold(ctx, sub, "r1"); err != nil {
		t.Fatal(err)
	}
	if st, _ := eng.Status(ctx, sub); st.State != StateStopped {
		t.Fatalf("one hold of two lifted: %s", st.State)
	}
	if err := eng.Unhold(ctx, sub, "r2"); err != nil {
		t.Fatal(err)
	}
	rec.waitHandled(t, "o1", 2) // from position 1 again
	st, _ := eng.Status(ctx, sub)
	if st.State != StateRunning || len(st.Partitions) != 2 || st.Partitions[0].Epoch != 2 {
		t.Fatalf("after the holds: %+v", st)
	}
	if err := eng.ResetHeld(ctx, sub, 1, nil, Caller{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("ResetHeld without a hold: %v", err)
	}
}

// TestPauseEndKeepsAnotherHostsPause: two hosts on one ledger, both paused
// until a time; one host pauses again without an end, and the other, not
// told yet, reaches the old end on its clock: the ledger keeps the new
// pause, and that host stays paused, as stored. Without a change, the end
// unpauses both.
func TestPauseEndKeepsAnotherHostsPause(t *testing.T) {
	opts := Options{Partitions: 1}
	e := newEnv(t, opts)
	a := e.host("A", opts, spec(sub, newRecorder(e.clock, nil)))
	b := e.host("B", opts, spec(sub, newRecorder(e.clock, nil)))
	ctx := context.Background()
	stored := func() string {
		var v []byte
		if err := e.store.View(ctx, func(tx ledger.Tx) error {
			var err error
			v, err = tx.Meta(sub, metaPaused)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return string(v)
	}

	if err := a.PauseUntil(ctx, sub, t0.Add(time.Hour), Caller{}); err != nil {
		t.Fatal(err)
	}
	if err := b.RefreshPause(ctx, sub); err != nil {
		t.Fatal(err)
	}
	if err := a.Pause(ctx, sub, Caller{}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(2 * time.Hour)
	checkfor.Eventually(t, func() error {
		if st, _ := b.Status(ctx, sub); !st.PausedUntil.IsZero() {
			return fmt.Errorf("B paused until %v, want it past the old end", st.PausedUntil)
		}
		return nil
	})
	if v := stored(); v != "true" {
		t.Fatalf("stored %q after B's old end, want A's pause", v)
	}
	for name, eng := range map[string]*Engine{"A": a, "B": b} {
		if st, _ := eng.Status(ctx, sub); st.State != StatePaused {
			t.Fatalf("%s: %s", name, st.State)
		}
	}

	end := e.clock.Now().Add(time.Hour)
	if err := a.PauseUntil(ctx, sub, end, Caller{}); err != nil {
		t.Fatal(err)
	}
	if err := b.RefreshPause(ctx, sub); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(2 * time.Hour)
	checkfor.Eventually(t, func() error {
		sa, _ := a.Status(ctx, sub)
		sb, _ := b.Status(ctx, sub)
		if sa.State != StateRunning || sb.State != StateRunning {
			return fmt.Errorf("A %s, B %s, want both running at the end", sa.State, sb.State)
		}
		return nil
	})
	if v := stored(); v != "false" {
		t.Fatalf("stored %q after the end", v)
	}
}
