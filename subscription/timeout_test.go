package subscription

import (
	"context"
	"errors"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/clock"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/retry"
)

// slowInvoker waits for its attempt's context to end, as a slow guest under
// the sandbox does, and reports what report makes of the context's end.
type slowInvoker struct {
	calls  atomic.Int32
	report func(ctx context.Context) *retry.Failure
}

func (s *slowInvoker) Invoke(ctx context.Context, d Delivery) *retry.Failure {
	s.calls.Add(1)
	<-ctx.Done()
	return s.report(ctx)
}

// The ways an invoker may report the end of its context.
var slowReports = []struct {
	name   string
	report func(ctx context.Context) *retry.Failure
}{
	// What the sandbox used to report: the context ended, so "canceled".
	{"reports canceled", func(context.Context) *retry.Failure {
		return &retry.Failure{Classes: []string{retry.ClassCanceled}, Message: "the caller canceled the call"}
	}},
	// A handler that ignores its deadline and returns nothing.
	{"returns nil", func(context.Context) *retry.Failure { return nil }},
	// An error without a class.
	{"unclassified error", func(ctx context.Context) *retry.Failure {
		return &retry.Failure{Message: ctx.Err().Error()}
	}},
	// An invoker that reads ctx as documented: DeadlineExceeded with the
	// engine's cause is the attempt's timeout.
	{"reads the cause", func(ctx context.Context) *retry.Failure {
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) || context.Cause(ctx) != ErrAttemptTimeout {
			return &retry.Failure{Classes: []string{retry.ClassCanceled}, Message: "wrong: " + ctx.Err().Error()}
		}
		return &retry.Failure{Classes: []string{retry.ClassTimeout}, Message: "deadline"}
	}},
}

// An attempt that runs past its timeout is a failure of class
// berth.Timeout in the record and in every attempt of its history, however
// the invoker reported its context's end; it never reads berth.Canceled.
func TestTimedOutAttemptIsATimeout(t *testing.T) {
	for _, tt := range slowReports {
		t.Run(tt.name, func(t *testing.T) {
			clock := clock.NewFake(t0)
			inv := &slowInvoker{report: tt.report}
			s := spec(sub, inv)
			s.OverrideRetry = retry.Settings{MaxAttempts: 2, Timeout: time.Second}
			e := newEnv(t, Options{}, s)
			e.clock = clock
			e.start()
			e.append("Order", "slow")
			checkfor.Eventually(t, func() error { return callsMade(inv.calls.Load(), 1) })
			clock.Advance(time.Second) // the attempt's deadline
			e.advance()                // the backoff
			checkfor.Eventually(t, func() error { return callsMade(inv.calls.Load(), 2) })
			clock.Advance(time.Second)
			r := e.waitRecord(sub, "Order", "slow", func(*ledger.Record) bool { return true })
			if r.Attempts != 2 || r.Error.Kind != "timeout" || !slices.Equal(r.Error.Classes, []string{retry.ClassTimeout}) {
				t.Fatalf("record %+v", r)
			}
			attempts := 0
			for _, h := range r.History {
				if h.Action != "attempt" {
					continue
				}
				attempts++
				if h.Error == nil || !slices.Equal(h.Error.Classes, []string{retry.ClassTimeout}) || h.Error.Kind != "timeout" {
					t.Errorf("history entry %+v", h)
				}
			}
			if attempts != 2 {
				t.Errorf("history %+v", r.History)
			}
			ns := e.notifications()
			if len(ns) != 1 || ns[0].Error == nil || !slices.Equal(ns[0].Error.Classes, []string{retry.ClassTimeout}) {
				t.Errorf("notifications %+v", ns)
			}
		})
	}
}

// berth.Timeout made unrecoverable, by a classifier rule or by the handler's
// own list, parks on the first timeout.
func TestUnrecoverableTimeoutParksOnFirstTimeout(t *testing.T) {
	rules, err := retry.NewClassifier([]retry.Rule{{Class: retry.ClassTimeout, As: "unrecoverable"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name       string
		classifier *retry.Classifier
		handler    []string
		reason     string
	}{
		{"classifier rule", rules, nil, "classifier rule 1: " + retry.ClassTimeout},
		{"handler unrecoverable", nil, []string{retry.ClassTimeout}, "handler unrecoverable: " + retry.ClassTimeout},
	} {
		for _, rep := range slowReports {
			t.Run(tt.name+"/"+rep.name, func(t *testing.T) {
				clock := clock.NewFake(t0)
				inv := &slowInvoker{report: rep.report}
				s := spec(sub, inv)
				s.HandlerRetry = retry.Settings{Unrecoverable: tt.handler}
				s.OverrideRetry = retry.Settings{MaxAttempts: 5, Timeout: time.Second}
				e := newEnv(t, Options{Classifier: tt.classifier}, s)
				e.clock = clock
				e.start()
				e.append("Order", "slow")
				checkfor.Eventually(t, func() error { return callsMade(inv.calls.Load(), 1) })
				clock.Advance(time.Second)
				r := e.waitRecord(sub, "Order", "slow", func(*ledger.Record) bool { return true })
				if r.Attempts != 1 || r.Error.Kind != "timeout" || !slices.Equal(r.Error.Classes, []string{retry.ClassTimeout}) {
					t.Fatalf("record %+v", r)
				}
				if inv.calls.Load() != 1 {
					t.Fatalf("%d attempts, want 1", inv.calls.Load())
				}
			})
		}
	}
}

// A long-horizon retry that runs past the parked timeout is a berth.Timeout
// in the record too.
func TestParkedRetryTimeoutIsATimeout(t *testing.T) {
	clock := clock.NewFake(t0)
	inv := &slowInvoker{report: slowReports[0].report}
	s := spec(sub, inv)
	s.OverrideRetry = retry.Settings{MaxAttempts: 1, Timeout: time.Second}
	s.Parked = retry.ParkedSettings{FirstDelay: time.Minute, Timeout: 5 * time.Second}
	e := newEnv(t, Options{}, s)
	e.clock = clock
	e.start()
	e.append("Order", "slow")
	checkfor.Eventually(t, func() error { return callsMade(inv.calls.Load(), 1) })
	clock.Advance(time.Second)
	e.waitRecord(sub, "Order", "slow", func(*ledger.Record) bool { return true })
	if d := e.advance(); d != time.Minute {
		t.Fatalf("first retry after %v", d)
	}
	checkfor.Eventually(t, func() error { return callsMade(inv.calls.Load(), 2) })
	clock.Advance(5 * time.Second)
	r := e.waitRecord(sub, "Order", "slow", func(r *ledger.Record) bool { return r.ParkedRetries == 1 })
	last := r.History[len(r.History)-1]
	if r.Attempts != 2 || !slices.Equal(r.Error.Classes, []string{retry.ClassTimeout}) || r.Error.Kind != "timeout" ||
		last.Action != "retry" || last.Error == nil || !slices.Equal(last.Error.Classes, []string{retry.ClassTimeout}) {
		t.Fatalf("record %+v", r)
	}
}

// An attempt the host cancels (a shutdown, a reset) is not counted: with a
// budget of one attempt, it neither parks nor spends it, and the event is
// delivered again.
func TestCancelledAttemptIsNotCounted(t *testing.T) {
	for _, how := range []string{"shutdown", "reset"} {
		t.Run(how, func(t *testing.T) {
			clock := clock.NewFake(t0)
			var slow atomic.Bool
			slow.Store(true)
			var calls, cancelled atomic.Int32
			inv := InvokerFunc(func(ctx context.Context, d Delivery) *retry.Failure {
				calls.Add(1)
				if !slow.Load() {
					return nil
				}
				<-ctx.Done()
				if errors.Is(ctx.Err(), context.Canceled) {
					cancelled.Add(1)
				}
				return &retry.Failure{Classes: []string{retry.ClassCanceled}, Message: "the caller canceled the call"}
			})
			s := spec(sub, inv)
			s.OverrideRetry = retry.Settings{MaxAttempts: 1, Timeout: time.Hour}
			e := newEnv(t, Options{}, s)
			e.clock = clock
			e.start()
			e.append("Order", "o")
			checkfor.Eventually(t, func() error { return callsMade(calls.Load(), 1) })
			slow.Store(false)
			switch how {
			case "shutdown":
				e.restart()
			case "reset":
				if err := e.eng.Reset(context.Background(), sub, 1, Caller{}); err != nil {
					t.Fatal(err)
				}
			}
			checkfor.Eventually(t, func() error { return callsMade(calls.Load(), 2) })
			checkfor.Eventually(t, func() error { return e.checkpointAt(sub, 2) })
			if cancelled.Load() != 1 {
				t.Errorf("the attempt's context was not cancelled")
			}
			if r := e.record(sub, "Order", "o"); r != nil {
				t.Fatalf("parked %+v", r)
			}
		})
	}
}
