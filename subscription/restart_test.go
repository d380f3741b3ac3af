package subscription

import (
	"context"
	"errors"
	"fmt"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/clock"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/retry"
)

// A parked aggregate stays parked across a restart: its held events are not
// delivered, and its retry schedule goes on (the retry due at 3 minutes
// fires after the restart) and resumes it in order.
func TestRestartWhileParked(t *testing.T) {
	clock := clock.NewFake(t0)
	var broken atomic.Bool
	broken.Store(true)
	rec := brokenFor(clock, &broken, "p")
	e := newEnv(t, Options{}, brokenSpec(rec))
	e.clock = clock
	e.start()
	e.append("Order", "p")
	e.waitRecord(sub, "Order", "p", func(*ledger.Record) bool { return true })
	e.append("Order", "p")
	e.append("Order", "n")
	rec.waitHandled(t, "n", 1)
	e.restart()
	e.append("Order", "p")
	e.append("Order", "n")
	rec.waitHandled(t, "n", 2)
	if calls := rec.of("p"); len(calls) != 1 {
		t.Fatalf("held events delivered after restart: %+v", calls)
	}
	broken.Store(false)
	if d := e.advance(); d != 3*time.Minute {
		t.Fatalf("parked retry after %v", d)
	}
	rec.waitHandled(t, "p", 3)
	checkfor.Eventually(t, func() error { return e.recordGone("Order", "p") })
	if got := rec.handled("p"); !slices.Equal(got, seq(1, 3)) {
		t.Fatalf("handled %v", got)
	}
}

// A restart during a flaky service's backoff: the event is delivered again
// and succeeds; nothing is parked or out of order.
func TestRestartDuringBackoff(t *testing.T) {
	clock := clock.NewFake(t0)
	rec := newRecorder(clock, func(d Delivery, n int) *retry.Failure {
		if n < 3 {
			return &retry.Failure{Message: "down"}
		}
		return nil
	})
	e := newEnv(t, Options{}, spec(sub, rec))
	e.clock = clock
	e.start()
	e.append("Order", "o")
	e.append("Order", "o")
	e.blockUntil(1)
	e.restart()
	e.advance() // the restarted delivery fails once more (call 2), then succeeds
	rec.waitHandled(t, "o", 2)
	if got := rec.handled("o"); !slices.Equal(got, []uint64{1, 2}) {
		t.Fatalf("handled %v", got)
	}
	if e.record(sub, "Order", "o") != nil {
		t.Fatal("parked")
	}
}

// A restart during a partition-wide outage: still no budget spent, and all
// handled once the service is back.
func TestRestartDuringOutage(t *testing.T) {
	clock := clock.NewFake(t0)
	var down atomic.Bool
	down.Store(true)
	rec := newRecorder(clock, func(d Delivery, n int) *retry.Failure {
		if down.Load() {
			return &retry.Failure{Reported: retry.ReportedSystemic, Message: "store down"}
		}
		return nil
	})
	s := spec(sub, rec)
	s.OverrideRetry = retry.Settings{MaxAttempts: 1}
	e := newEnv(t, Options{Partitions: 1}, s)
	e.clock = clock
	e.start()
	for _, id := range []string{"a", "b"} {
		e.append("Order", id)
	}
	e.advance()
	e.blockUntil(1)
	e.restart()
	e.advance()
	e.blockUntil(1)
	down.Store(false)
	e.advance()
	rec.waitHandled(t, "a", 1)
	// b may be in a backoff of its own on the clock when the probe
	// succeeds (it failed before the pause was recognised): time goes on.
	e.driveUntil(func() error {
		if got := rec.handled("b"); len(got) != 1 {
			return fmt.Errorf("b handled %v, want once", got)
		}
		return nil
	})
	if st := e.status(sub); len(st.Parked) != 0 {
		t.Fatalf("parked %v", st.Parked)
	}
}

// A restart in the middle of a replay: the resume runs again from where it
// started (at least once), and ends with every event handled in order.
func TestRestartMidReplay(t *testing.T) {
	clock := clock.NewFake(t0)
	var broken atomic.Bool
	broken.Store(true)
	stall := make(chan struct{})
	var stalled atomic.Bool
	rec := newRecorder(clock, func(d Delivery, n int) *retry.Failure {
		if broken.Load() {
			return &retry.Failure{Classes: []string{"Bug"}}
		}
		if d.Commit.Version == 3 && stalled.CompareAndSwap(false, true) {
			close(stall)
			return &retry.Failure{Message: "cut off by the restart"}
		}
		return nil
	})
	e := newEnv(t, Options{}, brokenSpec(rec))
	e.clock = clock
	e.start()
	e.append("Order", "p")
	e.waitRecord(sub, "Order", "p", func(*ledger.Record) bool { return true })
	for range 4 {
		e.append("Order", "p")
	}
	broken.Store(false)
	if err := e.eng.Resume(context.Background(), sub, "Order", "p", Caller{Actor: "alice", Reason: "fixed"}); err != nil {
		t.Fatal(err)
	}
	recv(t, stall, "version 3's attempt cut off")
	e.blockUntil(1) // version 3's first attempt failed; in its backoff
	e.restart()
	rec.waitHandled(t, "p", 7) // 1, 2 before; 1..5 again after the restart
	checkfor.Eventually(t, func() error { return e.recordGone("Order", "p") })
	e.append("Order", "p")
	rec.waitHandled(t, "p", 8)
	if got := rec.handled("p"); !slices.Equal(got, []uint64{1, 2, 1, 2, 3, 4, 5, 6}) {
		t.Fatalf("handled %v", got)
	}
}

// A restart right after a skip: the skipped events stay skipped.
func TestRestartAfterSkip(t *testing.T) {
	clock := clock.NewFake(t0)
	var broken atomic.Bool
	broken.Store(true)
	rec := brokenFor(clock, &broken, "p")
	e := newEnv(t, Options{}, brokenSpec(rec))
	e.clock = clock
	e.start()
	for range 3 {
		e.append("Order", "p")
	}
	e.waitRecord(sub, "Order", "p", func(*ledger.Record) bool { return true })
	if err := e.eng.Pause(context.Background(), sub, Caller{}); err != nil {
		t.Fatal(err)
	}
	if err := e.eng.Skip(context.Background(), sub, "Order", "p", 2, Caller{Actor: "alice", Reason: "test data"}); err != nil {
		t.Fatal(err)
	}
	broken.Store(false)
	e.restart() // the replay never ran: paused
	if err := e.eng.Unpause(context.Background(), sub, Caller{}); err != nil {
		t.Fatal(err)
	}
	rec.waitHandled(t, "p", 1)
	checkfor.Eventually(t, func() error { return e.recordGone("Order", "p") })
	if got := rec.handled("p"); !slices.Equal(got, []uint64{3}) {
		t.Fatalf("handled %v", got)
	}
}

// A crash (no final checkpoint write) delivers again from the durable
// checkpoint: at least once, never a gap, in order per aggregate.
func TestCrashDeliversAgainFromDurableCheckpoint(t *testing.T) {
	clock := clock.NewFake(t0)
	rec := newRecorder(clock, nil)
	e := newEnv(t, Options{CheckpointEvery: 1 << 20, CheckpointInterval: time.Hour, Partitions: 4}, spec(sub, rec))
	e.clock = clock
	e.start()
	for v := range 5 {
		for a := range 4 {
			_ = v
			e.append("Order", fmt.Sprint(a))
		}
	}
	for a := range 4 {
		rec.waitHandled(t, fmt.Sprint(a), 5)
	}
	e.crash()
	for a := range 4 {
		e.append("Order", fmt.Sprint(a))
	}
	for a := range 4 {
		id := fmt.Sprint(a)
		rec.waitHandled(t, id, 11)
		if got := rec.handled(id); !slices.Equal(got, append(seq(1, 5), seq(1, 6)...)) {
			t.Fatalf("%s handled %v", id, got)
		}
	}
}

// A restart in the middle of a backoff continues the event's retry budget
// rather than granting a fresh one: with a budget of 3, two failures before
// the restart and one after park the aggregate, with the attempts numbered
// on from where they were.
func TestRestartContinuesTheRetryBudget(t *testing.T) {
	clock := clock.NewFake(t0)
	rec := newRecorder(clock, func(Delivery, int) *retry.Failure { return &retry.Failure{Message: "down"} })
	s := spec(sub, rec)
	s.OverrideRetry = retry.Settings{MaxAttempts: 3}
	e := newEnv(t, Options{}, s)
	e.clock = clock
	e.start()
	e.append("Order", "o")
	e.advance() // attempt 1 failed; its backoff ends, attempt 2 fails
	e.blockUntil(1)
	e.restart()
	r := e.waitRecord(sub, "Order", "o", func(*ledger.Record) bool { return true })
	calls := rec.of("o")
	if len(calls) != 3 || r.Attempts != 3 {
		t.Fatalf("%d calls, record says %d attempts; want 3 and 3 (the budget carried over the restart)", len(calls), r.Attempts)
	}
	if got := []int{calls[0].Attempt, calls[1].Attempt, calls[2].Attempt}; !slices.Equal(got, []int{1, 2, 3}) {
		t.Errorf("attempt numbers %v, want [1 2 3]", got)
	}
	if !r.FirstFailure.Equal(calls[0].At) {
		t.Errorf("first failure %v, want the first attempt's %v", r.FirstFailure, calls[0].At)
	}
	// The budget's own record is gone once the record holds it.
	err := e.store.View(context.Background(), func(tx ledger.Tx) error {
		_, err := tx.Meta(sub, budgetKey(aggKey{"Order", "o"}))
		return err
	})
	if !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("the spent budget is still recorded after the park: %v", err)
	}
}

// A handled event leaves no budget behind.
func TestHandledEventLeavesNoBudget(t *testing.T) {
	clock := clock.NewFake(t0)
	rec := newRecorder(clock, func(_ Delivery, n int) *retry.Failure {
		if n == 1 {
			return &retry.Failure{Message: "blip"}
		}
		return nil
	})
	e := newEnv(t, Options{}, spec(sub, rec))
	e.clock = clock
	e.start()
	e.append("Order", "o")
	e.advance()
	rec.waitHandled(t, "o", 1)
	checkfor.Eventually(t, func() error {
		err := e.store.View(context.Background(), func(tx ledger.Tx) error {
			_, err := tx.Meta(sub, budgetKey(aggKey{"Order", "o"}))
			return err
		})
		if !errors.Is(err, ledger.ErrNotFound) {
			return fmt.Errorf("o's budget not forgotten: reading it gives %v", err)
		}
		return nil
	})
}
