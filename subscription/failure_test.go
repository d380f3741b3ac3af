package subscription

import (
	"context"
	"fmt"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/clock"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/retry"
)

// The ShipmentNotifier: UnknownBuyer is unrecoverable, so the order parks at
// once, with a full record and a "parked" notification, while its later
// events are held and other orders go on. It waits for an operator, with no
// long-horizon retry (docs/failure-model.md, sections 4 and 5; issue 9
// changed the assertion from a next retry at +3 min).
func TestUnknownBuyerParksAtOnce(t *testing.T) {
	clock := clock.NewFake(t0)
	rec := newRecorder(clock, func(d Delivery, n int) *retry.Failure {
		if d.Commit.AggregateID == "unknown" && d.Commit.Version == 1 {
			return &retry.Failure{Classes: []string{"UnknownBuyerException", "NotificationException"},
				Message: "no such buyer", Code: "BUYER_404"}
		}
		return nil
	})
	s := spec(sub, rec)
	s.HandlerRetry = retry.Settings{MaxAttempts: 5, InitialBackoff: time.Second, MaxBackoff: 30 * time.Second,
		Timeout: 10 * time.Second, Unrecoverable: []string{"UnknownBuyerException"}}
	e := newEnv(t, Options{Partitions: 1}, s)
	e.clock = clock
	e.append("Order", "unknown")
	e.append("Order", "known")
	e.append("Order", "unknown")
	e.append("Order", "known")
	e.start()
	r := e.waitRecord(sub, "Order", "unknown", func(*ledger.Record) bool { return true })
	rec.waitHandled(t, "known", 2)
	if n := len(rec.of("unknown")); n != 1 {
		t.Fatalf("unknown buyer called %d times, want 1 (no retry)", n)
	}
	if r.Version != 1 || r.Index != 0 || r.Position != 1 || r.Attempts != 1 || r.State != ledger.StateWaiting ||
		r.WaitReason != ledger.WaitUnrecoverable {
		t.Fatalf("record %+v", r)
	}
	if !slices.Equal(r.Error.Classes, []string{"UnknownBuyerException", "NotificationException"}) ||
		r.Error.Message != "no such buyer" || r.Error.Code != "BUYER_404" || r.Error.Kind != "unrecoverable" {
		t.Fatalf("error %+v", r.Error)
	}
	if !r.FirstFailure.Equal(t0) || !r.LastFailure.Equal(t0) || !r.NextRetry.IsZero() {
		t.Fatalf("times %v %v %v; want no next retry", r.FirstFailure, r.LastFailure, r.NextRetry)
	}
	if len(r.History) == 0 || r.History[0].Action != "parked" || !strings.Contains(r.History[0].Reason, "awaiting operator: unrecoverable") {
		t.Fatalf("history %+v", r.History)
	}
	ns := e.notifications()
	if len(ns) != 1 || ns[0].Type != ledger.NotifyParked || ns[0].AggregateID != "unknown" || ns[0].Version != 1 || ns[0].Error == nil {
		t.Fatalf("notifications %+v", ns)
	}
	// The held event (version 2) was not delivered, yet the checkpoint is past it.
	checkfor.Eventually(t, func() error { return e.checkpointAt(sub, 5) })
	if n := len(rec.of("unknown")); n != 1 {
		t.Fatalf("held event delivered: %+v", rec.of("unknown"))
	}
	if _, ok := e.scheduled(sub, "Order", "unknown"); ok {
		t.Fatal("a long-horizon retry is scheduled for an unrecoverable park")
	}
	st := e.status(sub)
	if st.Parked[ledger.StateWaiting] != 1 || st.Parked[ledger.StateRetrying] != 0 || st.Lag != 0 {
		t.Fatalf("status %+v", st)
	}
}

// A flaky service fails twice and succeeds on attempt 3; the waits were
// 100 ms and 200 ms on the clock, and the invocation key never changed.
func TestFlakyServiceSucceedsOnAttempt3(t *testing.T) {
	clock := clock.NewFake(t0)
	rec := newRecorder(clock, func(d Delivery, n int) *retry.Failure {
		if n < 3 {
			return &retry.Failure{Classes: []string{"IllegalStateException"}, Message: "The mail service is down."}
		}
		return nil
	})
	e := newEnv(t, Options{}, spec(sub, rec))
	e.clock = clock
	e.start()
	e.append("Order", "o1")
	e.append("Order", "o1")
	for range 5 {
		e.append("Order", "o1")
	}
	e.append("Order", "o1")
	if d := e.advance(); d != 100*time.Millisecond {
		t.Fatalf("first wait %v", d)
	}
	if d := e.advance(); d != 200*time.Millisecond {
		t.Fatalf("second wait %v", d)
	}
	rec.waitHandled(t, "o1", 8)
	calls := rec.of("o1")
	if len(calls) != 10 {
		t.Fatalf("%d calls", len(calls))
	}
	for i, c := range calls[:3] {
		if c.Attempt != i+1 || c.Key != sub+":Order/o1@1:0" || c.Version != 1 {
			t.Fatalf("call %d: %+v", i, c)
		}
	}
	if !calls[0].At.Equal(t0) || !calls[1].At.Equal(t0.Add(100*time.Millisecond)) || !calls[2].At.Equal(t0.Add(300*time.Millisecond)) {
		t.Fatalf("attempt times %v %v %v", calls[0].At, calls[1].At, calls[2].At)
	}
	if got := rec.handled("o1"); !slices.Equal(got, seq(1, 8)) {
		t.Fatalf("handled %v", got)
	}
	if e.record(sub, "Order", "o1") != nil {
		t.Fatal("parked")
	}
}

// An attempt that runs past its timeout is cancelled and counts as a failed
// attempt of class berth.Timeout.
func TestTimeoutCountsAsFailedAttempt(t *testing.T) {
	clock := clock.NewFake(t0)
	var calls atomic.Int32
	inv := InvokerFunc(func(ctx context.Context, d Delivery) *retry.Failure {
		calls.Add(1)
		if dl, ok := ctx.Deadline(); !ok || !dl.Equal(clock.Now().Add(time.Second)) {
			t.Errorf("deadline %v %v", dl, ok)
		}
		<-ctx.Done()
		if ctx.Err() != context.DeadlineExceeded {
			t.Errorf("ctx.Err() = %v", ctx.Err())
		}
		return nil // a handler that ignores the deadline still overran it
	})
	s := spec(sub, inv)
	s.OverrideRetry = retry.Settings{MaxAttempts: 2, Timeout: time.Second}
	e := newEnv(t, Options{}, s)
	e.clock = clock
	e.start()
	e.append("Order", "slow")
	checkfor.Eventually(t, func() error { return callsMade(calls.Load(), 1) })
	// The first attempt's timeout.
	clock.Advance(time.Second)
	if d := e.advance(); d != 100*time.Millisecond { // the backoff
		t.Fatalf("backoff %v", d)
	}
	checkfor.Eventually(t, func() error { return callsMade(calls.Load(), 2) })
	clock.Advance(time.Second)
	r := e.waitRecord(sub, "Order", "slow", func(*ledger.Record) bool { return true })
	if r.Attempts != 2 || r.Error.Kind != "timeout" || !slices.Equal(r.Error.Classes, []string{retry.ClassTimeout}) {
		t.Fatalf("record %+v", r)
	}
	if calls.Load() != 2 {
		t.Fatalf("%d calls", calls.Load())
	}
}

// A panicking handler is a recoverable failure of class berth.Panic.
func TestPanicIsRecoverableFailure(t *testing.T) {
	clock := clock.NewFake(t0)
	inv := InvokerFunc(func(ctx context.Context, d Delivery) *retry.Failure { panic("boom") })
	s := spec(sub, inv)
	s.OverrideRetry = retry.Settings{MaxAttempts: 1}
	e := newEnv(t, Options{}, s)
	e.clock = clock
	e.start()
	e.append("Order", "p")
	r := e.waitRecord(sub, "Order", "p", func(*ledger.Record) bool { return true })
	if r.Error.Kind != "panic" || r.Error.Classes[0] != retry.ClassPanic {
		t.Fatalf("error %+v", r.Error)
	}
}

// A poisoned aggregate does not slow its neighbours: while it sits in its
// backoff, the other aggregates of its partition are handled without the
// clock moving; once parked, its later events are held and the checkpoint
// moves past them.
func TestPoisonedAggregateDoesNotSlowNeighbours(t *testing.T) {
	clock := clock.NewFake(t0)
	rec := newRecorder(clock, func(d Delivery, n int) *retry.Failure {
		if d.Commit.AggregateID == "poison" {
			return &retry.Failure{Classes: []string{"NullPointerException"}, Message: "bug"}
		}
		return nil
	})
	e := newEnv(t, Options{Partitions: 1, Concurrency: 1}, spec(sub, rec))
	e.clock = clock
	e.start()
	e.append("Order", "poison")
	neighbours := []string{"n1", "n2", "n3", "n4", "n5", "n6"}
	for range 3 {
		for _, n := range neighbours {
			e.append("Order", n)
		}
	}
	e.append("Order", "poison")
	e.append("Order", "poison")
	for _, n := range neighbours {
		rec.waitHandled(t, n, 3)
	}
	if !clock.Now().Equal(t0) {
		t.Fatal("the clock moved")
	}
	for range 4 {
		e.advance() // 100, 200, 400, 800 ms of backoff
	}
	r := e.waitRecord(sub, "Order", "poison", func(*ledger.Record) bool { return true })
	if r.Attempts != 5 || r.Version != 1 || r.Error.Kind != "recoverable" {
		t.Fatalf("record %+v", r)
	}
	// 5 attempts + "parked": the history keeps them all.
	if len(r.History) != 6 {
		t.Fatalf("history %+v", r.History)
	}
	checkfor.Eventually(t, func() error { return e.checkpointAt(sub, 22) })
	if got := rec.of("poison"); len(got) != 5 {
		t.Fatalf("poison calls %+v", got)
	}
	if st := e.status(sub); st.Partitions[0].Held != 1 || st.Partitions[0].State != StateRunning {
		t.Fatalf("partition %+v", st.Partitions[0])
	}
}

// A partition-wide outage (connection refused) pauses the partition, which
// probes with backoff; no aggregate spends budget or is parked, and all go
// on when the service is back. Other partitions are not paused. The pause
// and its end are notified, each once, in order, with the detector's
// reason.
func TestPartitionOutageSpendsNoBudget(t *testing.T) {
	clock := clock.NewFake(t0)
	var down atomic.Bool
	down.Store(true)
	rec := newRecorder(clock, func(d Delivery, n int) *retry.Failure {
		if down.Load() {
			return &retry.Failure{Classes: []string{retry.ClassConnectionRefused}, Message: "connect: connection refused"}
		}
		return nil
	})
	s := spec(sub, rec)
	s.OverrideRetry = retry.Settings{MaxAttempts: 2}
	e := newEnv(t, Options{Partitions: 1, Concurrency: 3}, s)
	e.clock = clock
	e.start()
	for _, id := range []string{"a", "b", "c", "d"} {
		e.append("Order", id)
		e.append("Order", id)
	}
	var waits []time.Duration
	for range 6 {
		waits = append(waits, e.advance())
		if st := e.status(sub).Partitions[0]; st.State != StateSystemicPaused {
			t.Fatalf("partition %+v", st)
		}
	}
	want := []time.Duration{100e6, 200e6, 400e6, 800e6, 1600e6, 3200e6}
	if !slices.Equal(waits, want) {
		t.Fatalf("probe waits %v, want %v", waits, want)
	}
	e.blockUntil(1) // the last probe failed and the next waits
	down.Store(false)
	e.advance()
	// An aggregate may still be in the backoff of a failure the outage
	// refunded (a backoff is not cut short, backoff in outage.go): the
	// clock moves on while any is left to handle.
	checkfor.Eventually(t, func() error {
		for _, id := range []string{"a", "b", "c", "d"} {
			if got := rec.handled(id); len(got) < 2 {
				if d, ok := clock.NextFire(); ok {
					clock.Advance(d)
				}
				return fmt.Errorf("%s handled %v, want 2 events", id, got)
			}
		}
		return nil
	})
	st := e.status(sub)
	if len(st.Parked) != 0 || st.Partitions[0].State != StateRunning {
		t.Fatalf("status %+v", st)
	}
	if len(e.notifications()) != 0 {
		t.Fatal("notified")
	}
	checkfor.Eventually(t, func() error {
		if n := e.otherNotes(); len(n) != 2 {
			return fmt.Errorf("notified %v, want the pause and its end", n)
		}
		return nil
	})
	got := e.otherNotes()
	if !strings.HasPrefix(got[0], `partition-paused partition 0 by "": "`) || got[1] != "partition-resumed partition 0" {
		t.Fatalf("notifications %q, want the pause with the detector's reason, then its end", got)
	}
}

// Three aggregates of a partition failing within 10 s is taken for an
// outage too: the partition pauses instead of parking them.
func TestDetectorPausesPartition(t *testing.T) {
	clock := clock.NewFake(t0)
	var down atomic.Bool
	down.Store(true)
	rec := newRecorder(clock, func(d Delivery, n int) *retry.Failure {
		if down.Load() {
			return &retry.Failure{Classes: []string{"SQLException"}, Message: "db gone"}
		}
		return nil
	})
	s := spec(sub, rec)
	s.OverrideRetry = retry.Settings{MaxAttempts: 2}
	e := newEnv(t, Options{Partitions: 1, Concurrency: 3}, s)
	e.clock = clock
	e.start()
	for _, id := range []string{"a", "b", "c"} {
		e.append("Order", id)
	}
	checkfor.Eventually(t, func() error { return e.stateOf(sub, StateSystemicPaused) })
	for range 4 {
		e.advance()
	}
	down.Store(false)
	for i := 0; len(rec.handled("a"))+len(rec.handled("b"))+len(rec.handled("c")) < 3; i++ {
		if i > 20 {
			t.Fatal("not handled")
		}
		if clock.Waiters() > 0 {
			e.advance()
		}
		time.Sleep(time.Millisecond)
	}
	for _, id := range []string{"a", "b", "c"} {
		rec.waitHandled(t, id, 1)
	}
	if st := e.status(sub); len(st.Parked) != 0 {
		t.Fatalf("parked %+v", st.Parked)
	}
}

// A 429 with Retry-After: 2s is not retried before 2 s; the partition's
// concurrency is halved and raised again by a success.
func TestBackpressureHonoursRetryAfter(t *testing.T) {
	clock := clock.NewFake(t0)
	rec := newRecorder(clock, func(d Delivery, n int) *retry.Failure {
		if d.Commit.AggregateID == "busy" && n == 1 {
			return &retry.Failure{Message: "429 Too Many Requests", HTTP429: true, RetryAfter: 2 * time.Second}
		}
		return nil
	})
	e := newEnv(t, Options{Partitions: 1, Concurrency: 4}, spec(sub, rec))
	e.clock = clock
	e.start()
	e.append("Order", "busy")
	e.blockUntil(1)
	if st := e.status(sub).Partitions[0]; st.Concurrency != 2 {
		t.Fatalf("concurrency %d after backpressure, want 2", st.Concurrency)
	}
	clock.Advance(2*time.Second - time.Millisecond)
	// The retry still waits on the clock, 1ms to go: nothing fired it.
	if d, ok := clock.NextFire(); !ok || d != time.Millisecond || clock.Waiters() != 1 {
		t.Fatalf("after 2s-1ms: next timer in %v (%v), %d waiting; want the retry's, 1ms", d, ok, clock.Waiters())
	}
	if n := len(rec.of("busy")); n != 1 {
		t.Fatalf("retried before Retry-After: %d calls", n)
	}
	clock.Advance(time.Millisecond)
	rec.waitHandled(t, "busy", 1)
	if got := rec.of("busy")[1].At.Sub(t0); got != 2*time.Second {
		t.Fatalf("retried after %v", got)
	}
	checkfor.Eventually(t, func() error { return e.concurrencyAt(3) })
	e.append("Order", "other")
	rec.waitHandled(t, "other", 1)
	checkfor.Eventually(t, func() error { return e.concurrencyAt(4) })
}

// Backpressure parks only when its own budget is spent, never the regular
// one.
func TestBackpressureBudgetParks(t *testing.T) {
	clock := clock.NewFake(t0)
	rec := newRecorder(clock, func(d Delivery, n int) *retry.Failure {
		return &retry.Failure{Message: "busy", Reported: retry.ReportedBackpressure}
	})
	s := spec(sub, rec)
	s.OverrideRetry = retry.Settings{MaxAttempts: 1, BackpressureAttempts: 3}
	e := newEnv(t, Options{Partitions: 1}, s)
	e.clock = clock
	e.start()
	e.append("Order", "busy")
	e.advance()
	e.advance()
	r := e.waitRecord(sub, "Order", "busy", func(*ledger.Record) bool { return true })
	if r.Attempts != 3 || r.Error.Kind != "backpressure" {
		t.Fatalf("record %+v", r)
	}
	if st := e.status(sub).Partitions[0]; st.Concurrency != 1 {
		t.Fatalf("concurrency %d", st.Concurrency)
	}
}

// concurrencyAt says what partition 0 of sub runs at until it runs want
// aggregates at once; nil then.
func (e *env) concurrencyAt(want int) error {
	if p := e.status(sub).Partitions[0]; p.Concurrency != want {
		return fmt.Errorf("partition 0 at concurrency %d, want %d", p.Concurrency, want)
	}
	return nil
}
