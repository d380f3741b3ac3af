package subscription

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/clock"
)

type ctxKey struct{}

// An attempt's context ends the way the sandbox and the engine read it,
// whichever way the invoker watches it: by polling Err, by waiting on
// Done, or through a context derived from it.
func TestAttemptCtx(t *testing.T) {
	errShutdown := errors.New("shutdown")
	tests := []struct {
		name string
		// watch starts watching ctx before anything happens and returns a
		// channel closed once the watcher saw ctx end (nil: none).
		watch func(ctx context.Context) <-chan struct{}
		// act makes the context end: the deadline or the run.
		act          func(clock *clock.Fake, cancelRun context.CancelCauseFunc)
		wantErr      error
		wantCause    error
		wantTimedOut bool
	}{
		{"deadline, polled", nil,
			func(c *clock.Fake, _ context.CancelCauseFunc) { c.Advance(time.Second) },
			context.DeadlineExceeded, ErrAttemptTimeout, true},
		{"deadline, waited on", waitDone,
			func(c *clock.Fake, _ context.CancelCauseFunc) { c.Advance(time.Second) },
			context.DeadlineExceeded, ErrAttemptTimeout, true},
		{"deadline in two steps, waited on", waitDone,
			func(c *clock.Fake, _ context.CancelCauseFunc) { c.Advance(time.Second / 2); c.Advance(time.Second / 2) },
			context.DeadlineExceeded, ErrAttemptTimeout, true},
		{"deadline, derived context waited on", waitDerived,
			func(c *clock.Fake, _ context.CancelCauseFunc) { c.Advance(time.Second) },
			context.DeadlineExceeded, ErrAttemptTimeout, true},
		{"run cancelled, polled", nil,
			func(_ *clock.Fake, cancel context.CancelCauseFunc) { cancel(errShutdown) },
			context.Canceled, errShutdown, false},
		{"run cancelled, waited on", waitDone,
			func(_ *clock.Fake, cancel context.CancelCauseFunc) { cancel(errShutdown) },
			context.Canceled, errShutdown, false},
		{"run cancelled, derived context waited on", waitDerived,
			func(_ *clock.Fake, cancel context.CancelCauseFunc) { cancel(errShutdown) },
			context.Canceled, errShutdown, false},
		{"run cancelled, then the deadline", waitDone,
			func(c *clock.Fake, cancel context.CancelCauseFunc) { cancel(errShutdown); c.Advance(time.Second) },
			context.Canceled, errShutdown, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := clock.NewFake(t0)
			run, cancelRun := context.WithCancelCause(context.WithValue(context.Background(), ctxKey{}, "v"))
			defer cancelRun(nil)
			c := newAttemptCtx(run, clock, time.Second)
			if dl, ok := c.Deadline(); !ok || !dl.Equal(t0.Add(time.Second)) {
				t.Fatalf("Deadline() = %v, %v", dl, ok)
			}
			if c.Err() != nil || context.Cause(c) != nil {
				t.Fatalf("before: Err %v, Cause %v", c.Err(), context.Cause(c))
			}
			var seen <-chan struct{}
			if tt.watch != nil {
				seen = tt.watch(c)
			}
			tt.act(clock, cancelRun)
			if seen != nil {
				recv(t, seen, "the watcher to see Done")
			}
			if err := c.Err(); err != tt.wantErr {
				t.Fatalf("Err() = %v, want %v", err, tt.wantErr)
			}
			select {
			case <-c.Done():
			default:
				t.Fatal("Err is set but Done is open")
			}
			if cause := context.Cause(c); cause != tt.wantCause {
				t.Fatalf("Cause = %v, want %v", cause, tt.wantCause)
			}
			if got := c.timedOut(); got != tt.wantTimedOut {
				t.Fatalf("timedOut() = %v, want %v", got, tt.wantTimedOut)
			}
			if c.Value(ctxKey{}) != "v" {
				t.Fatal("the run's values are lost")
			}
			c.end()
			if err := c.Err(); err != tt.wantErr {
				t.Fatalf("after end: Err() = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

// An attempt that returns in time ends its context with context.Canceled
// and leaves no timer behind, whether or not Done was asked for.
func TestAttemptCtxEnd(t *testing.T) {
	for _, askDone := range []bool{false, true} {
		clock := clock.NewFake(t0)
		c := newAttemptCtx(context.Background(), clock, time.Second)
		if askDone {
			c.Done()
		}
		if c.timedOut() {
			t.Fatal("timed out before its deadline")
		}
		c.end()
		<-c.Done()
		if c.Err() != context.Canceled || context.Cause(c) != context.Canceled {
			t.Fatalf("after end: Err %v, Cause %v", c.Err(), context.Cause(c))
		}
		clock.Advance(time.Second)
		if c.timedOut() || c.Err() != context.Canceled {
			t.Fatalf("the deadline after the end: timedOut %v, Err %v", c.timedOut(), c.Err())
		}
		if pending := clock.Pending(); pending != 0 {
			t.Fatalf("%d timers left on the clock", pending)
		}
	}
}

// An invoker that ignores its context and returns after the deadline has
// timed out, though nothing watched the context.
func TestAttemptCtxOverrunUnwatched(t *testing.T) {
	clock := clock.NewFake(t0)
	c := newAttemptCtx(context.Background(), clock, time.Second)
	clock.Advance(2 * time.Second)
	if !c.timedOut() || context.Cause(c) != ErrAttemptTimeout {
		t.Fatalf("timedOut %v, Cause %v", c.timedOut(), context.Cause(c))
	}
}

func waitDone(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{})
	done := ctx.Done()
	go func() { <-done; close(ch) }()
	return ch
}

func waitDerived(ctx context.Context) <-chan struct{} {
	child, cancel := context.WithCancel(ctx)
	ch := make(chan struct{})
	go func() { defer cancel(); <-child.Done(); close(ch) }()
	return ch
}
