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

// brokenFor fails the aggregates in ids with an unrecoverable failure while
// broken is set.
func brokenFor(clock clock.Clock, broken *atomic.Bool, ids ...string) *recorder {
	return newRecorder(clock, func(d Delivery, n int) *retry.Failure {
		if broken.Load() && slices.Contains(ids, d.Commit.AggregateID) {
			return &retry.Failure{Classes: []string{"Bug"}, Message: "bad data"}
		}
		return nil
	})
}

// brokenSpec parks a "Bug" at once, as unrecoverable, and opts such parks
// in to the long-horizon retries (subscription.parked.retry-unrecoverable),
// which the tests of those retries drive; by default an unrecoverable park
// waits for an operator (TestUnknownBuyerParksAtOnce).
func brokenSpec(inv Invoker) Spec {
	s := spec(sub, inv)
	s.HandlerRetry = retry.Settings{Unrecoverable: []string{"Bug"}}
	s.Parked = retry.ParkedSettings{RetryUnrecoverable: retry.SwitchOn}
	return s
}

// Long-horizon retries run on the clock: the first 3 minutes after the
// park, the next after 6 more; a success resumes the aggregate, which sees
// its missed events in order — including one appended while it replays —
// and then rejoins live delivery with no gap and no duplicate.
func TestLongHorizonRetryResumesInOrder(t *testing.T) {
	clock := clock.NewFake(t0)
	var broken atomic.Bool
	broken.Store(true)
	var e *env
	var appended atomic.Bool
	rec := newRecorder(clock, func(d Delivery, n int) *retry.Failure {
		if d.Commit.AggregateID != "p" {
			return nil
		}
		if broken.Load() {
			return &retry.Failure{Classes: []string{"Bug"}, Message: "bad data"}
		}
		if d.Commit.Version == 2 && appended.CompareAndSwap(false, true) {
			e.append("Order", "p") // version 4, appended during the replay
		}
		return nil
	})
	e = newEnv(t, Options{Partitions: 2}, brokenSpec(rec))
	e.clock = clock
	e.start()
	e.append("Order", "p")
	e.waitRecord(sub, "Order", "p", func(*ledger.Record) bool { return true })
	e.append("Order", "p")
	e.append("Order", "n")
	e.append("Order", "p")
	rec.waitHandled(t, "n", 1)
	if d := e.advance(); d != 3*time.Minute {
		t.Fatalf("first parked retry after %v", d)
	}
	r := e.waitRecord(sub, "Order", "p", func(r *ledger.Record) bool { return r.ParkedRetries == 1 })
	if !r.NextRetry.Equal(t0.Add(9*time.Minute)) || r.State != ledger.StateRetrying || r.Attempts != 2 {
		t.Fatalf("after retry 1: %+v", r)
	}
	if c := rec.of("p")[1]; c.Key != sub+":Order/p@1:0" || c.Attempt != 2 {
		t.Fatalf("parked retry call %+v", c)
	}
	broken.Store(false)
	if d := e.advance(); d != 6*time.Minute {
		t.Fatalf("second parked retry after %v", d)
	}
	rec.waitHandled(t, "p", 4)
	checkfor.Eventually(t, func() error { return e.recordGone("Order", "p") })
	e.append("Order", "p")
	rec.waitHandled(t, "p", 5)
	e.waitIdle(sub)
	if got := rec.handled("p"); !slices.Equal(got, seq(1, 5)) {
		t.Fatalf("handled %v", got)
	}
	if got := notificationTypes(e.notifications()); !slices.Equal(got, []string{"parked:p", "resumed:p"}) {
		t.Fatalf("notifications %v", got)
	}
	checkfor.Eventually(t, func() error { return e.checkpointAt(sub, 7) })
}

// When the long-horizon retries are spent the aggregate waits for an
// operator, and says so; an operator's resume is recorded and notified,
// and a second resume is refused without touching the ledger.
func TestRetriesSpentThenOperatorResume(t *testing.T) {
	clock := clock.NewFake(t0)
	var broken atomic.Bool
	broken.Store(true)
	rec := brokenFor(clock, &broken, "p")
	s := brokenSpec(rec)
	s.Parked = retry.ParkedSettings{MaxRetries: 2, FirstDelay: time.Minute, Timeout: 5 * time.Second, RetryUnrecoverable: retry.SwitchOn}
	e := newEnv(t, Options{}, s)
	e.clock = clock
	e.start()
	e.append("Order", "p")
	e.append("Order", "p")
	e.waitRecord(sub, "Order", "p", func(*ledger.Record) bool { return true })
	if d := e.advance(); d != time.Minute {
		t.Fatal(d)
	}
	e.waitRecord(sub, "Order", "p", func(r *ledger.Record) bool { return r.ParkedRetries == 1 })
	if d := e.advance(); d != 2*time.Minute {
		t.Fatal(d)
	}
	r := e.waitRecord(sub, "Order", "p", func(r *ledger.Record) bool { return r.State == ledger.StateWaiting })
	if !r.NextRetry.IsZero() || r.ParkedRetries != 2 || r.History[len(r.History)-1].Action != "retries-spent" {
		t.Fatalf("record %+v", r)
	}
	if got := notificationTypes(e.notifications()); !slices.Equal(got, []string{"parked:p", "retries-spent:p"}) {
		t.Fatalf("notifications %v", got)
	}
	if n := clock.Waiters(); n != 0 {
		t.Fatalf("%d timers pending after the retries were spent", n)
	}
	broken.Store(false)
	e.append("Order", "p")
	clock.Advance(time.Hour)
	if err := e.eng.Resume(context.Background(), sub, "Order", "p", Caller{Actor: "alice", Reason: "fixed the buyer table"}); err != nil {
		t.Fatal(err)
	}
	rec.waitHandled(t, "p", 3)
	checkfor.Eventually(t, func() error { return e.recordGone("Order", "p") })
	if got := rec.handled("p"); !slices.Equal(got, seq(1, 3)) {
		t.Fatalf("handled %v", got)
	}
	ns := e.notifications()
	last := ns[len(ns)-1]
	if last.Type != ledger.NotifyResumed || last.Actor != "alice" || last.By != "operator" || last.Reason != "fixed the buyer table" || !last.Time.Equal(t0.Add(time.Hour+3*time.Minute)) {
		t.Fatalf("notification %+v", last)
	}
	before := e.snapshot(sub)
	if err := e.eng.Resume(context.Background(), sub, "Order", "p", Caller{Actor: "bob", Reason: "again"}); !errors.Is(err, ErrNotParked) {
		t.Fatalf("second resume: %v", err)
	}
	if e.snapshot(sub) != before {
		t.Fatal("ledger changed by a refused resume")
	}
}

// The resume's history entry keeps who, when and why.
func TestResumeRecordedInHistory(t *testing.T) {
	clock := clock.NewFake(t0)
	var broken atomic.Bool
	broken.Store(true)
	blockReplay := make(chan struct{})
	rec := newRecorder(clock, func(d Delivery, n int) *retry.Failure {
		if broken.Load() {
			return &retry.Failure{Classes: []string{"Bug"}}
		}
		<-blockReplay // closed at the test's end if it fails first
		return nil
	})
	e := newEnv(t, Options{}, brokenSpec(rec))
	unblock := unblockAtEnd(t, blockReplay)
	e.clock = clock
	e.start()
	e.append("Order", "p")
	e.waitRecord(sub, "Order", "p", func(*ledger.Record) bool { return true })
	broken.Store(false)
	if err := e.eng.Resume(context.Background(), sub, "Order", "p", Caller{Actor: "alice", Reason: "deployed the fix"}); err != nil {
		t.Fatal(err)
	}
	r := e.record(sub, "Order", "p")
	h := r.History[len(r.History)-1]
	if r.State != ledger.StateResuming || h.Action != "resume" || h.Actor != "alice" || h.Reason != "deployed the fix" || !h.Time.Equal(t0) {
		t.Fatalf("record %+v", r)
	}
	// Resuming already: not parked.
	if err := e.eng.Skip(context.Background(), sub, "Order", "p", 0, Caller{Actor: "bob", Reason: "x"}); !errors.Is(err, ErrNotParked) {
		t.Fatalf("skip while resuming: %v", err)
	}
	unblock()
	rec.waitHandled(t, "p", 1)
}

// Skip moves past every held event; events appended later are delivered.
// Skip through a version delivers the events after it, in order.
func TestSkip(t *testing.T) {
	clock := clock.NewFake(t0)
	var broken atomic.Bool
	broken.Store(true)
	rec := brokenFor(clock, &broken, "all", "part")
	e := newEnv(t, Options{}, brokenSpec(rec))
	e.clock = clock
	e.start()
	for range 3 {
		e.append("Order", "all")
		e.append("Order", "part")
	}
	e.waitRecord(sub, "Order", "all", func(*ledger.Record) bool { return true })
	e.waitRecord(sub, "Order", "part", func(*ledger.Record) bool { return true })
	checkfor.Eventually(t, func() error { return e.checkpointAt(sub, 7) })
	broken.Store(false)
	ctx := context.Background()
	if err := e.eng.Skip(ctx, sub, "Order", "all", 0, Caller{Actor: "alice", Reason: "bad import"}); err != nil {
		t.Fatal(err)
	}
	if err := e.eng.Skip(ctx, sub, "Order", "part", 2, Caller{Actor: "alice", Reason: "versions 1-2 were test data"}); err != nil {
		t.Fatal(err)
	}
	rec.waitHandled(t, "part", 1)
	checkfor.Eventually(t, func() error { return e.recordGone("Order", "all", "part") })
	e.append("Order", "all")
	e.append("Order", "part")
	rec.waitHandled(t, "all", 1)
	rec.waitHandled(t, "part", 2)
	if got := rec.handled("all"); !slices.Equal(got, []uint64{4}) {
		t.Fatalf("all handled %v", got)
	}
	if got := rec.handled("part"); !slices.Equal(got, []uint64{3, 4}) {
		t.Fatalf("part handled %v", got)
	}
	ns := e.notifications()
	if got := notificationTypes(ns); !slices.Equal(got, []string{"parked:all", "parked:part", "skipped:all", "skipped:part"}) &&
		!slices.Equal(got, []string{"parked:part", "parked:all", "skipped:all", "skipped:part"}) {
		t.Fatalf("notifications %v", got)
	}
	if ns[2].Version != 3 || ns[3].Version != 2 || ns[3].Actor != "alice" {
		t.Fatalf("skip notifications %+v %+v", ns[2], ns[3])
	}
	// Skipping again: not parked, nothing changes.
	before := e.snapshot(sub)
	if err := e.eng.Skip(ctx, sub, "Order", "all", 0, Caller{Actor: "alice", Reason: "again"}); !errors.Is(err, ErrNotParked) {
		t.Fatalf("second skip: %v", err)
	}
	if e.snapshot(sub) != before {
		t.Fatal("ledger changed")
	}
}

// Bad input is a sentinel error and leaves the ledger as it was.
func TestBadInputLeavesLedgerUnchanged(t *testing.T) {
	clock := clock.NewFake(t0)
	var broken atomic.Bool
	broken.Store(true)
	rec := brokenFor(clock, &broken, "p")
	e := newEnv(t, Options{}, brokenSpec(rec))
	e.clock = clock
	e.start()
	e.append("Order", "p")
	e.append("Order", "p")
	e.waitRecord(sub, "Order", "p", func(*ledger.Record) bool { return true })
	ctx := context.Background()
	before := e.snapshot(sub)
	cases := []struct {
		name string
		err  error
		want error
	}{
		{"resume of an unknown subscription", e.eng.Resume(ctx, "No.such", "Order", "p", Caller{Actor: "a", Reason: "r"}), ErrUnknownSubscription},
		{"skip of an unknown subscription", e.eng.Skip(ctx, "No.such", "Order", "p", 0, Caller{Actor: "a", Reason: "r"}), ErrUnknownSubscription},
		{"pause of an unknown subscription", e.eng.Pause(ctx, "No.such", Caller{}), ErrUnknownSubscription},
		{"reset of an unknown subscription", e.eng.Reset(ctx, "No.such", 1, Caller{}), ErrUnknownSubscription},
		{"resume of an unknown aggregate", e.eng.Resume(ctx, sub, "Order", "nope", Caller{Actor: "a", Reason: "r"}), ErrNotParked},
		{"resume of an unknown aggregate type", e.eng.Resume(ctx, sub, "Invoice", "p", Caller{Actor: "a", Reason: "r"}), ErrNotParked},
		{"skip of an unknown aggregate", e.eng.Skip(ctx, sub, "Order", "nope", 0, Caller{Actor: "a", Reason: "r"}), ErrNotParked},
		{"skip beyond the aggregate's version", e.eng.Skip(ctx, sub, "Order", "p", 9, Caller{Actor: "a", Reason: "r"}), ErrBadVersion},
		{"reset beyond the head", e.eng.Reset(ctx, sub, 99, Caller{}), ErrBadPosition},
	}
	for _, c := range cases {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.err, c.want)
		}
	}
	if _, err := e.eng.Status(ctx, "No.such"); !errors.Is(err, ErrUnknownSubscription) {
		t.Errorf("status: %v", err)
	}
	if _, err := e.eng.Parked(ctx, sub, "Order", "nope"); !errors.Is(err, ErrNotParked) {
		t.Errorf("parked: %v", err)
	}
	if e.snapshot(sub) != before {
		t.Fatalf("ledger changed:\n%s\n%s", before, e.snapshot(sub))
	}
}

// Pause stops delivery and survives a restart; Unpause goes on; Reset
// delivers again from a position.
// Pause, unpause and reset act, last across a restart, and each queues a
// notification naming the caller (a second pause changes nothing and
// queues none); the end of a pause with an until is notified too, by
// nobody.
func TestPauseUnpauseReset(t *testing.T) {
	clock := clock.NewFake(t0)
	rec := newRecorder(clock, nil)
	e := newEnv(t, Options{}, spec(sub, rec))
	e.clock = clock
	e.start()
	ctx, by := context.Background(), Caller{Actor: "ops", Reason: "the database migrates"}
	e.append("Order", "a")
	rec.waitHandled(t, "a", 1)
	for range 2 {
		if err := e.eng.Pause(ctx, sub, by); err != nil {
			t.Fatal(err)
		}
	}
	e.append("Order", "a")
	e.waitGateHeld(sub)
	if st := e.status(sub); st.State != StatePaused || len(rec.handled("a")) != 1 {
		t.Fatalf("paused: %+v, handled %v", st, rec.handled("a"))
	}
	e.restart()
	e.waitGateHeld(sub)
	if st := e.status(sub); st.State != StatePaused || len(rec.handled("a")) != 1 || st.Lag != 1 {
		t.Fatalf("after restart: %+v, handled %v", st, rec.handled("a"))
	}
	if err := e.eng.Unpause(ctx, sub, Caller{Actor: "ops", Reason: "migrated"}); err != nil {
		t.Fatal(err)
	}
	rec.waitHandled(t, "a", 2)
	if err := e.eng.Reset(ctx, sub, 1, Caller{Actor: "admin", Reason: "replay"}); err != nil {
		t.Fatal(err)
	}
	rec.waitHandled(t, "a", 4)
	if got := rec.handled("a"); !slices.Equal(got, []uint64{1, 2, 1, 2}) {
		t.Fatalf("handled %v", got)
	}
	if st := e.status(sub); st.State != StateRunning {
		t.Fatalf("state %v", st.State)
	}
	until := clock.Now().Add(time.Hour)
	if err := e.eng.PauseUntil(ctx, sub, until, by); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour)
	checkfor.Eventually(t, func() error {
		if n := e.otherNotes(); len(n) != 5 {
			return fmt.Errorf("notified %v, want 5 with the end of the pause", n)
		}
		return nil
	})
	want := []string{
		`subscription-paused by "ops": "the database migrates"`,
		`subscription-unpaused by "ops": "migrated"`,
		`subscription-reset position 1 by "admin": "replay"`,
		`subscription-paused until ` + until.Format(time.RFC3339) + ` by "ops": "the database migrates"`,
		`subscription-unpaused by "": "the pause's until passed"`,
	}
	if got := e.otherNotes(); !slices.Equal(got, want) {
		t.Errorf("notifications\n%q\nwant\n%q", got, want)
	}
}

func TestSetHostDefaultsAppliesToEverySubscription(t *testing.T) {
	sp := spec(sub, InvokerFunc(func(context.Context, Delivery) *retry.Failure { return nil }))
	sp.ProcessorRetry = retry.Settings{Timeout: time.Second}
	e := newEnv(t, Options{}, sp)
	eng := e.start()
	eng.SetHostDefaults(retry.Settings{MaxAttempts: 9, InitialBackoff: 50 * time.Millisecond, MaxBackoff: time.Second, Timeout: 5 * time.Second, BackpressureAttempts: 3},
		retry.ParkedSettings{MaxRetries: 2, FirstDelay: time.Minute, MaxDelay: time.Hour, Timeout: time.Minute}, nil)
	st := e.status(sub)
	if st.Policy.MaxAttempts != 9 || st.Policy.Sources[retry.KeyMaxAttempts] != retry.SourceDefault {
		t.Errorf("max-attempts %d from %s, want 9 from default", st.Policy.MaxAttempts, st.Policy.Sources[retry.KeyMaxAttempts])
	}
	if st.Policy.Timeout != time.Second || st.Policy.Sources[retry.KeyTimeout] != retry.SourceProcessor {
		t.Errorf("timeout %v from %s, want the processor's 1s", st.Policy.Timeout, st.Policy.Sources[retry.KeyTimeout])
	}
	if st.ParkedSettings.MaxRetries != 2 {
		t.Errorf("parked = %+v", st.ParkedSettings)
	}
}

// An operator's resume does not wait forever for an aggregate a parked
// retry is working on: when its context ends first it is ErrBusy, and the
// record is unchanged.
func TestResumeOfABusyAggregateIsErrBusy(t *testing.T) {
	rec := newRecorder(clock.Real(), func(Delivery, int) *retry.Failure {
		return &retry.Failure{Classes: []string{"UnknownBuyer"}, Message: "no such buyer"}
	})
	s := spec(sub, rec)
	s.ProcessorRetry = retry.Settings{Unrecoverable: []string{"UnknownBuyer"}}
	e := newEnv(t, Options{}, s)
	eng := e.start()
	e.append("Order", "o")
	before := e.waitRecord(sub, "Order", "o", func(*ledger.Record) bool { return true })
	// Hold the aggregate as a running parked retry does.
	unlock := eng.subs[sub].keys.lock(aggKey{"Order", "o"})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := eng.Resume(ctx, sub, "Order", "o", Caller{Actor: "ops", Reason: "try"})
	unlock()
	if !errors.Is(err, ErrBusy) {
		t.Fatalf("resume of a busy aggregate: %v, want ErrBusy", err)
	}
	if after := e.record(sub, "Order", "o"); after == nil || after.State != before.State || len(after.History) != len(before.History) {
		t.Errorf("the record changed: %+v -> %+v", before, after)
	}
	if err := eng.Resume(context.Background(), sub, "Order", "o", Caller{Actor: "ops", Reason: "now free"}); err != nil {
		t.Fatalf("resume once free: %v", err)
	}
}
