package subscription

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berthhq/berth/internal/clock"
)

// ErrAttemptTimeout is the cause (context.Cause) of an attempt's context
// that ended at the attempt's timeout. It wraps context.DeadlineExceeded,
// which is also what the context's Err reports, so an invoker can tell its
// attempt's deadline from a cancellation by ctx.Err() alone.
var ErrAttemptTimeout = fmt.Errorf("subscription: the attempt ran past its timeout: %w", context.DeadlineExceeded)

// attemptCtx is the context of one attempt, and the attempt's one deadline
// (see run.invoke). It reports context.DeadlineExceeded, with cause
// ErrAttemptTimeout, once the deadline on the engine's clock has passed, and
// the run's error (context.Canceled) when the run is cancelled first.
//
// It costs one allocation and no timer for an attempt that never asks for
// Done: Err reads the clock, so a caller that polls Err (the sandbox's loop
// guard, a native handler checking ctx.Err()) sees the deadline without a
// timer, and Deadline reports it, so the sandbox starts none of its own.
// Only the first call of Done builds what a channel needs: a cancelable
// child of the run's context and a timer on the clock for the deadline
// (lazy). context.WithTimeoutCause did all of that for every attempt: four
// allocations, a timer, and a child registered with the run's context under
// its lock, shared by every worker of the subscription.
//
// Value answers from lazy once it exists, so that context.Cause finds its
// cause and a context derived from this one is cancelled with it directly
// (its Done is lazy's).
type attemptCtx struct {
	parent   context.Context
	clock    clock.Clock
	deadline time.Time

	mu    sync.Mutex                  // orders state's changes against the building of lazy
	state atomicState                 // changed under mu; Err's fast path reads it without
	lazy  atomic.Pointer[attemptLazy] // set once, under mu

	// slot is the partition whose slot a live delivery's attempt holds
	// (nil for one that holds none); left says the invoker gave it up
	// (LeaveSlot), and the engine takes one back when Invoke returns.
	slot *partition
	left atomic.Bool
}

// attemptKey is the key under which an attempt's context answers Value
// with itself, so that LeaveSlot finds it under contexts derived from it.
type attemptKey struct{}

// attemptLazy is what an attempt's Done needs: a child of the run's context
// that the deadline or the end of the attempt cancels, and the deadline's
// timer.
type attemptLazy struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	timer  clock.Timer // nil once the deadline had passed when lazy was built
}

// attemptState is where an attempt's context stands.
type attemptState uint32

// atomicState is an attemptState read without the context's lock.
type atomicState struct{ v atomic.Uint32 }

func (a *atomicState) get() attemptState  { return attemptState(a.v.Load()) }
func (a *atomicState) set(s attemptState) { a.v.Store(uint32(s)) }

const (
	attemptRunning attemptState = iota
	attemptExpired              // the deadline passed while the run went on
	attemptEnded                // the attempt returned (run.invoke ended it)
)

// newAttemptCtx returns the context of an attempt that may run d from now on
// clock c, under parent (the run's context).
func newAttemptCtx(parent context.Context, c clock.Clock, d time.Duration) *attemptCtx {
	return newAttemptCtxAt(parent, c, c.Now(), d)
}

// newAttemptCtxAt is newAttemptCtx for a caller that has just read c at
// now.
func newAttemptCtxAt(parent context.Context, c clock.Clock, now time.Time, d time.Duration) *attemptCtx {
	return &attemptCtx{parent: parent, clock: c, deadline: now.Add(d)}
}

// ContextFree is an Invoker that keeps no reference to an attempt's context
// once Invoke has returned, save through what the context's Done gave it
// (an HTTP call's goroutines, a derived context): its KeepsNoContext says
// so. The engine then reuses the memory of an attempt's context whose Done
// was never asked for, for a later attempt: the one allocation the engine
// made a call. An invoker that does not say so gets a new context each
// attempt, which it may keep (a native handler's goroutine polling Err sees
// context.Canceled once the attempt ended).
type ContextFree interface {
	KeepsNoContext() bool
}

// keepsNoContext reports whether inv says it is ContextFree.
func keepsNoContext(inv Invoker) bool {
	cf, ok := inv.(ContextFree)
	return ok && cf.KeepsNoContext()
}

// attemptCtxs are attempt contexts a ContextFree invoker gave back.
var attemptCtxs = sync.Pool{New: func() any { return new(attemptCtx) }}

// reusedAttemptCtxAt is newAttemptCtxAt on memory a past attempt gave back
// (releaseAttemptCtx).
func reusedAttemptCtxAt(parent context.Context, c clock.Clock, now time.Time, d time.Duration) *attemptCtx {
	ac := attemptCtxs.Get().(*attemptCtx)
	ac.parent, ac.clock, ac.deadline, ac.slot = parent, c, now.Add(d), nil
	ac.left.Store(false)
	ac.state.set(attemptRunning)
	return ac
}

// releaseAttemptCtx gives an ended attempt's context back for another
// attempt, unless its Done was asked for: then a goroutine may hold its
// channel, or a context derived from it, and it is left to them.
func releaseAttemptCtx(ac *attemptCtx) {
	if ac.lazy.Load() != nil {
		return
	}
	ac.parent, ac.clock, ac.slot = nil, nil, nil
	attemptCtxs.Put(ac)
}

// Deadline reports the attempt's deadline on the engine's clock.
func (c *attemptCtx) Deadline() (time.Time, bool) { return c.deadline, true }

// Value answers as the run's context does (through lazy once it exists),
// and with c itself for attemptKey.
func (c *attemptCtx) Value(key any) any {
	if key == (attemptKey{}) {
		return c
	}
	if l := c.lazy.Load(); l != nil {
		return l.ctx.Value(key)
	}
	return c.parent.Value(key)
}

// Done returns a channel closed at the deadline, when the run is cancelled,
// or when the attempt ends, whichever comes first.
func (c *attemptCtx) Done() <-chan struct{} {
	if l := c.lazy.Load(); l != nil {
		return l.ctx.Done()
	}
	c.mu.Lock()
	l := c.buildLocked()
	due := c.state.get() == attemptRunning && c.dueLocked()
	if due {
		c.state.set(attemptExpired)
	}
	ended := c.state.get() == attemptEnded
	c.mu.Unlock()
	switch {
	case due:
		l.cancel(ErrAttemptTimeout)
	case ended:
		l.cancel(context.Canceled)
	}
	return l.ctx.Done()
}

// Err reports context.DeadlineExceeded once the deadline has passed (and
// expires the context if nothing has yet), the run's error when it was
// cancelled first, context.Canceled once the attempt ended, else nil.
func (c *attemptCtx) Err() error {
	// While the attempt runs and nothing asked for Done, no lock: the
	// sandbox and the engine ask three times a call.
	if c.lazy.Load() == nil && c.state.get() == attemptRunning && c.parent.Err() == nil && !c.dueLocked() {
		return nil
	}
	c.mu.Lock()
	l := c.lazy.Load()
	if c.state.get() == attemptRunning {
		if err := c.parentErr(l); err != nil {
			c.mu.Unlock()
			return err
		}
		if c.dueLocked() {
			c.state.set(attemptExpired)
			l = c.buildLocked()
			c.mu.Unlock()
			l.cancel(ErrAttemptTimeout)
			return context.DeadlineExceeded
		}
	}
	state := c.state.get()
	c.mu.Unlock()
	switch state {
	case attemptExpired:
		<-l.ctx.Done() // Done is closed before Err says so, as the contract wants
		return context.DeadlineExceeded
	case attemptEnded:
		if l != nil {
			<-l.ctx.Done()
		}
		return context.Canceled
	}
	return nil
}

// parentErr is the run's error: through lazy when it exists, whose Done is
// closed by the time its Err says so.
func (c *attemptCtx) parentErr(l *attemptLazy) error {
	if l != nil {
		return l.ctx.Err()
	}
	return c.parent.Err()
}

// dueLocked reports whether the deadline has passed (c.mu held, or Err's
// fast path: the deadline is set before the context is handed out).
func (c *attemptCtx) dueLocked() bool { return clock.Until(c.clock, c.deadline) <= 0 }

// buildLocked builds lazy if it is not built yet and returns it; c.mu held.
// The timer is started only while the attempt runs and its deadline is
// ahead; the caller expires a context whose deadline has passed.
func (c *attemptCtx) buildLocked() *attemptLazy {
	if l := c.lazy.Load(); l != nil {
		return l
	}
	l := &attemptLazy{}
	l.ctx, l.cancel = context.WithCancelCause(c.parent)
	if c.state.get() == attemptRunning {
		if d := clock.Until(c.clock, c.deadline); d > 0 {
			l.timer = c.clock.AfterFunc(d, c.expire)
		}
	}
	c.lazy.Store(l)
	return l
}

// expire is the deadline's timer: it ends a running attempt with cause
// ErrAttemptTimeout unless the run was cancelled first.
func (c *attemptCtx) expire() {
	c.mu.Lock()
	l := c.lazy.Load()
	if c.state.get() != attemptRunning || l.ctx.Err() != nil {
		c.mu.Unlock()
		return
	}
	c.state.set(attemptExpired)
	c.mu.Unlock()
	l.cancel(ErrAttemptTimeout)
}

// end ends the attempt: its context reports context.Canceled from now on
// (unless its deadline ended it first), and its timer, if any, stops.
func (c *attemptCtx) end() {
	c.mu.Lock()
	if c.state.get() == attemptRunning {
		c.state.set(attemptEnded)
	}
	l := c.lazy.Load()
	c.mu.Unlock()
	if l != nil {
		if l.timer != nil {
			l.timer.Stop()
		}
		l.cancel(context.Canceled)
	}
}

// timedOut reports whether the deadline, not the run's cancellation, ended
// the attempt. An attempt whose invoker ignored its context and returned
// after the deadline has timed out too: Err expires it here.
func (c *attemptCtx) timedOut() bool {
	c.Err()
	c.mu.Lock()
	expired := c.state.get() == attemptExpired
	c.mu.Unlock()
	return expired && c.parent.Err() == nil
}
