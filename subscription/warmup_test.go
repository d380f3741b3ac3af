package subscription

import (
	"context"
	"encoding/json"
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

// warmingInvoker stands for a module that starts on the interpreter: until
// ready is closed, an attempt runs until its deadline and the host reports
// it cut short for warming up (registry maps sandbox.ErrWarmingUp to this:
// berth.Canceled with Await); after, it is compiled, and does what compiled
// says (nil: handled).
type warmingInvoker struct {
	ready    chan struct{}
	compiled func(ctx context.Context) *retry.Failure
	calls    atomic.Int32
	attempts chan int    // Delivery.Attempt of every call
	early    atomic.Bool // a call came while warming up, after the first
}

func (w *warmingInvoker) Invoke(ctx context.Context, d Delivery) *retry.Failure {
	n := w.calls.Add(1)
	// Ready or not when called: the test closes ready once it has seen the
	// attempt, which must not turn a warm-up attempt into a compiled one.
	compiled := false
	select {
	case <-w.ready:
		compiled = true
	default:
	}
	select {
	case w.attempts <- d.Attempt:
	case <-ctx.Done():
		return &retry.Failure{Classes: []string{retry.ClassCanceled}, Message: "cancelled"}
	}
	if compiled {
		return w.compiled(ctx)
	}
	if n > 1 {
		w.early.Store(true) // delivered again before the host was ready: a busy loop
	}
	<-ctx.Done()
	return &retry.Failure{Classes: []string{retry.ClassCanceled}, Message: "warming up: ran past its deadline on the interpreter", Await: w.ready}
}

// startWarming starts an engine on a fake clock whose one subscription runs
// a warmingInvoker (compiled: what it does once ready) under a timeout of
// 1s and maxAttempts, and appends one event to Order/id.
func startWarming(t *testing.T, maxAttempts int, id string, compiled func(context.Context) *retry.Failure) (*env, *clock.Fake, *warmingInvoker) {
	clock := clock.NewFake(t0)
	inv := &warmingInvoker{ready: make(chan struct{}), attempts: make(chan int, 8), compiled: compiled}
	s := spec(sub, inv)
	s.OverrideRetry = retry.Settings{MaxAttempts: maxAttempts, Timeout: time.Second}
	e := newEnv(t, Options{}, s)
	e.clock = clock
	e.start()
	e.append("Order", id)
	return e, clock, inv
}

// An attempt whose deadline passes while the module warms up on the
// interpreter is the host's, not the handler's: with a budget of one
// attempt it neither parks nor spends it, nothing is written to the
// ledger's budget, and the event is delivered again, at the same attempt
// number, once the compiled tier is ready — not before.
func TestWarmingUpTimeoutIsNotCounted(t *testing.T) {
	e, clock, inv := startWarming(t, 1, "w", func(context.Context) *retry.Failure { return nil })
	if a := recv(t, inv.attempts, "an attempt"); a != 1 {
		t.Fatalf("first attempt numbered %d", a)
	}
	clock.Advance(time.Second) // its deadline, on the interpreter
	close(inv.ready)           // the compiled tier is ready
	if a := recv(t, inv.attempts, "an attempt"); a != 1 {
		t.Fatalf("the attempt after warm-up numbered %d, want 1 (the warm-up's is not counted)", a)
	}
	e.waitIdle(sub)
	if inv.early.Load() {
		t.Error("the event was delivered again before the compiled tier was ready")
	}
	if n := inv.calls.Load(); n != 2 {
		t.Errorf("%d calls, want 2", n)
	}
	if r := e.record(sub, "Order", "w"); r != nil {
		t.Fatalf("parked %+v", r)
	}
	if st := e.status(sub); st.Checkpoint != 2 {
		t.Errorf("checkpoint %d, want 2 (past the event)", st.Checkpoint)
	}
}

// A guest that genuinely runs past its deadline still times out and is
// charged once it runs compiled: the warm-up's attempt is not in its budget
// or its record, the compiled ones are, as berth.Timeout.
func TestGuestThatSpinsIsChargedOnceCompiled(t *testing.T) {
	e, clock, inv := startWarming(t, 2, "spin", func(ctx context.Context) *retry.Failure {
		<-ctx.Done()
		return &retry.Failure{Classes: []string{retry.ClassTimeout}, Message: "the call ran past its deadline"}
	})
	recv(t, inv.attempts, "an attempt")
	clock.Advance(time.Second) // the warm-up attempt's deadline
	close(inv.ready)
	if a := recv(t, inv.attempts, "an attempt"); a != 1 {
		t.Fatalf("first compiled attempt numbered %d, want 1", a)
	}
	clock.Advance(time.Second) // its deadline: charged
	var sb storedBudget
	checkfor.Eventually(t, func() error {
		var b []byte
		err := e.store.View(context.Background(), func(tx ledger.Tx) error {
			var err error
			b, err = tx.Meta(sub, budgetKey(aggKey{"Order", "spin"}))
			return err
		})
		if err != nil {
			return fmt.Errorf("the budget of one compiled attempt: %w", err)
		}
		return json.Unmarshal(b, &sb)
	})
	if sb.Attempts != 1 || sb.Failures != 1 || len(sb.History) != 1 || !slices.Equal(sb.History[0].Error.Classes, []string{retry.ClassTimeout}) {
		t.Fatalf("budget %+v, want one timeout", sb)
	}
	e.advance() // the backoff
	if a := recv(t, inv.attempts, "an attempt"); a != 2 {
		t.Fatalf("second compiled attempt numbered %d, want 2", a)
	}
	clock.Advance(time.Second)
	r := e.waitRecord(sub, "Order", "spin", func(*ledger.Record) bool { return true })
	if r.Attempts != 2 || !slices.Equal(r.Error.Classes, []string{retry.ClassTimeout}) || r.Error.Kind != "timeout" {
		t.Fatalf("record %+v, want parked by two timeouts", r)
	}
	for _, h := range r.History {
		if h.Action == "attempt" && (h.Error == nil || !slices.Equal(h.Error.Classes, []string{retry.ClassTimeout})) {
			t.Errorf("history entry %+v", h)
		}
	}
	if n := inv.calls.Load(); n != 3 {
		t.Errorf("%d calls, want 3 (one warm-up, two compiled)", n)
	}
}
