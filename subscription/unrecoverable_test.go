package subscription

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/clock"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/retry"
)

// bugFor fails agg with an unrecoverable "Bug" from its call number from
// on, and with a recoverable "Down" before.
func bugFor(clock clock.Clock, agg string, from int) *recorder {
	return newRecorder(clock, func(d Delivery, n int) *retry.Failure {
		switch {
		case d.Commit.AggregateID != agg:
			return nil
		case n >= from:
			return &retry.Failure{Classes: []string{"Bug"}, Message: "bad data"}
		}
		return &retry.Failure{Classes: []string{"Down"}, Message: "service down"}
	})
}

// bugSpec makes Bug unrecoverable and spends the budget of a Down at once
// (listed recoverable, so that it is not taken for an outage).
func bugSpec(inv Invoker, parked retry.ParkedSettings) Spec {
	s := spec(sub, inv)
	s.HandlerRetry = retry.Settings{MaxAttempts: 1, Unrecoverable: []string{"Bug"}, Recoverable: []string{"Down"}}
	s.Parked = parked
	return s
}

// With subscription.parked.retry-unrecoverable on, an unrecoverable park is
// retried over the long horizon like a spent budget.
func TestUnrecoverableParkOptsInToRetries(t *testing.T) {
	clock := clock.NewFake(t0)
	rec := bugFor(clock, "p", 1)
	e := newEnv(t, Options{}, bugSpec(rec, retry.ParkedSettings{RetryUnrecoverable: retry.SwitchOn}))
	e.clock = clock
	e.start()
	e.append("Order", "p")
	r := e.waitRecord(sub, "Order", "p", func(*ledger.Record) bool { return true })
	if r.State != ledger.StateRetrying || !r.NextRetry.Equal(t0.Add(3*time.Minute)) || r.WaitReason != "" ||
		r.Error.Class != "unrecoverable" || r.History[0].Reason != "long-horizon retries scheduled" {
		t.Fatalf("record %+v; want retrying at +3m", r)
	}
	if d := e.advance(); d != 3*time.Minute {
		t.Fatalf("parked retry after %v", d)
	}
	r = e.waitRecord(sub, "Order", "p", func(r *ledger.Record) bool { return r.ParkedRetries == 1 })
	if r.State != ledger.StateRetrying || !r.NextRetry.Equal(t0.Add(9*time.Minute)) || len(rec.of("p")) != 2 {
		t.Fatalf("after the first retry: %+v, %d calls; want retrying at +9m after 2 calls", r, len(rec.of("p")))
	}
}

// A park for a spent budget keeps its schedule; when a long-horizon retry
// then meets an unrecoverable failure, the retries stop there: the record
// waits for an operator, says why, and "retries-spent" is notified.
func TestLongHorizonRetryStopsAtUnrecoverable(t *testing.T) {
	clock := clock.NewFake(t0)
	rec := bugFor(clock, "p", 2)
	e := newEnv(t, Options{}, bugSpec(rec, retry.ParkedSettings{}))
	e.clock = clock
	e.start()
	e.append("Order", "p")
	r := e.waitRecord(sub, "Order", "p", func(*ledger.Record) bool { return true })
	if r.State != ledger.StateRetrying || !r.NextRetry.Equal(t0.Add(3*time.Minute)) || r.Error.Class != "recoverable" {
		t.Fatalf("a spent budget: %+v; want retrying at +3m", r)
	}
	if d := e.advance(); d != 3*time.Minute {
		t.Fatalf("parked retry after %v", d)
	}
	r = e.waitRecord(sub, "Order", "p", func(r *ledger.Record) bool { return r.State == ledger.StateWaiting })
	last := r.History[len(r.History)-1]
	if r.WaitReason != ledger.WaitUnrecoverable || !r.NextRetry.IsZero() || r.ParkedRetries != 1 || r.Attempts != 2 ||
		r.Error.Class != "unrecoverable" || last.Action != "retries-stopped" {
		t.Fatalf("record %+v (last entry %+v); want waiting for an operator as unrecoverable after one retry", r, last)
	}
	ns := e.notifications()
	if got := notificationTypes(ns); !slices.Equal(got, []string{ledger.NotifyParked + ":p", ledger.NotifyRetriesSpent + ":p"}) {
		t.Fatalf("notifications %v", got)
	}
	if _, ok := e.scheduled(sub, "Order", "p"); ok {
		t.Fatal("still scheduled")
	}
}

// A restart schedules no retry for an unrecoverable park: neither for one
// that waits for an operator, nor for one a host that retried such parks
// left retrying (it is turned over to an operator at once, without an
// attempt).
func TestRestartSchedulesNoRetryForUnrecoverable(t *testing.T) {
	clock := clock.NewFake(t0)
	rec := bugFor(clock, "p", 1)
	e := newEnv(t, Options{}, bugSpec(rec, retry.ParkedSettings{}))
	e.clock = clock
	e.start()
	e.append("Order", "p")
	e.waitRecord(sub, "Order", "p", func(*ledger.Record) bool { return true })
	e.append("Order", "old")
	rec.waitHandled(t, "old", 1)
	// A record as an older host (or one with retry-unrecoverable on) left it:
	// retrying, due in 3 minutes, its class known only by its kind.
	err := e.store.Update(context.Background(), func(tx ledger.Tx) error {
		return tx.PutParked(&ledger.Record{Subscription: sub, AggregateType: "Order", AggregateID: "old", Version: 1,
			Position: 2, Error: ledger.ErrorInfo{Classes: []string{"Bug"}, Message: "bad data", Kind: "unrecoverable"},
			Attempts: 1, FirstFailure: t0, LastFailure: t0, State: ledger.StateRetrying, NextRetry: t0.Add(3 * time.Minute),
			History: []ledger.Entry{{Time: t0, Action: "parked", Attempt: 1, Version: 1}}})
	})
	if err != nil {
		t.Fatal(err)
	}
	e.restart()
	old := e.waitRecord(sub, "Order", "old", func(r *ledger.Record) bool { return r.State == ledger.StateWaiting })
	if old.WaitReason != ledger.WaitUnrecoverable || !old.NextRetry.IsZero() || old.ParkedRetries != 0 ||
		old.History[len(old.History)-1].Action != "retries-stopped" {
		t.Fatalf("old record after the restart: %+v", old)
	}
	if !clock.Now().Equal(t0) {
		t.Fatalf("the clock moved to %v", clock.Now())
	}
	if n := len(rec.of("old")); n != 1 {
		t.Fatalf("old called %d times, want only its first delivery", n)
	}
	p := e.record(sub, "Order", "p")
	if p == nil || p.State != ledger.StateWaiting || p.WaitReason != ledger.WaitUnrecoverable || !p.NextRetry.IsZero() {
		t.Fatalf("p after the restart: %+v", p)
	}
	for _, id := range []string{"p", "old"} {
		if at, ok := e.scheduled(sub, "Order", id); ok {
			t.Fatalf("%s scheduled at %v after the restart", id, at)
		}
	}
	if n := len(rec.of("p")); n != 1 {
		t.Fatalf("p called %d times, want 1", n)
	}
}
