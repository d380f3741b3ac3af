package sandbox

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berthhq/berth/wasm/abi"
)

// callState is what host functions need to know about the call they serve.
// Each instance has one, reused by every call it serves (one at a time), so
// that a call allocates no state of its own.
//
// The call's deadline has one owner. When the caller's context carries it
// (the engine's attempt deadline), the sandbox only observes the context:
// the loop guard, a sleeping guest and host calls look at it, and no timer
// is started. When the sandbox owns it (a direct call with a timeout), the
// instance's one timer, reset for the call, expires the call.
type callState struct {
	mod *Module
	ev  *abi.Event // &event during a call; nil while the instance runs _initialize
	// event is the call's envelope, copied: holding the caller's pointer
	// would move every caller's event to the heap (an allocation a call).
	event abi.Event
	ports Ports
	ctx   context.Context // the caller's: its deadline, cancellation and values

	// mu orders a timer that fires late, after its call ended, against the
	// start of the next call: fire expires a call only if the deadline it
	// finds under mu has passed.
	mu sync.Mutex
	// own is the sandbox's own deadline for the call in unix nanoseconds,
	// 0 when the caller's context owns the deadline (or there is none).
	own atomic.Int64
	// expired is set when the call's deadline passes or its caller gives up;
	// the loop guard, sleeps and host functions end the call when they see
	// it. firedAt is when the host saw that, in unix nanoseconds.
	expired atomic.Bool
	firedAt atomic.Int64
	wake    chan struct{} // capacity 1: expire wakes a sleeping guest through it
	// refusedGrow is the size in bytes the guest last asked its memory to
	// grow to and the host refused (past the module's memory limit), in
	// this call; 0: none (memory.go).
	refusedGrow atomic.Uint64

	reply    []byte // the pending reply of the last host call, if pending
	pending  bool
	observed Observed
	commands []abi.Command

	rec    recording // the call's attempt capsule arena (record.go)
	replay *replayer // answers the call from a capsule in a replay; nil normally
	// replayNano is the last monotonic reading a replay gave the guest,
	// kept from one replay to the next on a reused instance (Replays).
	replayNano int64
}

func (cs *callState) init(m *Module) { cs.mod, cs.wake = m, make(chan struct{}, 1) }

// begin readies the state for a call of ev (nil: _initialize) under ctx,
// with own the sandbox's deadline (zero: the caller's context owns it).
func (cs *callState) begin(ctx context.Context, ev *abi.Event, ports Ports, own time.Time) {
	cs.mu.Lock()
	cs.ctx, cs.ev, cs.ports = ctx, nil, ports
	if ev != nil {
		cs.event = *ev
		cs.ev = &cs.event
	}
	cs.expired.Store(false)
	cs.firedAt.Store(0)
	cs.refusedGrow.Store(0)
	if own.IsZero() {
		cs.own.Store(0)
	} else {
		cs.own.Store(own.UnixNano())
	}
	select {
	case <-cs.wake: // a late timer's wake-up, meant for an earlier call
	default:
	}
	cs.mu.Unlock()
	cs.pending, cs.observed, cs.commands = false, Observed{}, nil
	cs.rec.reset(ev != nil)
}

// end drops what the call referred to, so that an idle instance keeps
// nothing of its last call alive.
func (cs *callState) end() {
	cs.mu.Lock()
	cs.own.Store(0)
	cs.ctx, cs.ev, cs.event, cs.ports = nil, nil, abi.Event{}, Ports{}
	cs.mu.Unlock()
	cs.commands = nil
	cs.rec.on = false
}

// fire is the instance timer's function: it expires the call if the
// sandbox's deadline for it has passed (a timer that fires late, after its
// call ended, finds no deadline, or a later one).
func (cs *callState) fire() {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if own := cs.own.Load(); own != 0 && time.Now().UnixNano() >= own {
		cs.expire()
	}
}

// expire marks the call as past its deadline and wakes a sleeping guest.
func (cs *callState) expire() {
	// firedAt before expired: whoever sees expired finds firedAt set.
	cs.firedAt.CompareAndSwap(0, time.Now().UnixNano())
	if cs.expired.CompareAndSwap(false, true) {
		select {
		case cs.wake <- struct{}{}:
		default:
		}
	}
}

// checkExpired ends the call if its deadline passed or its caller gave up.
// It reads the clock as well as the flag: a host call the sandbox's
// deadline cut short may return before the instance's timer has run.
func (cs *callState) checkExpired() {
	if cs.expired.Load() {
		panic(errDeadline)
	}
	if own := cs.own.Load(); (own != 0 && time.Now().UnixNano() >= own) || (cs.ctx != nil && cs.ctx.Err() != nil) {
		cs.expire()
		panic(errDeadline)
	}
}

// yield is the instance's WASI sched_yield, where the loop guard reaches
// the host every few thousand loop iterations: it ends a call whose
// deadline passed. Reaching Go here also lets the Go scheduler and garbage
// collector preempt a guest that would otherwise spin without a safe point.
func (cs *callState) yield() { cs.checkExpired() }

// nanosleep is the instance's WASI sleep.
// In a replay it returns at once: the guest's clock is the recording's.
func (cs *callState) nanosleep(ns int64) {
	if cs.replay != nil {
		cs.checkExpired()
		return
	}
	cs.sleep(time.Duration(ns))
}

// outbound returns the context for work a host call hands to others (an
// HTTP request): the caller's, ending at the sandbox's deadline if it owns
// one. Never the callContext, which the instance's next call re-aims.
func (cs *callState) outbound() (context.Context, context.CancelFunc) {
	ctx := cs.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	if dl, ok := cs.deadline(); ok {
		return context.WithDeadline(ctx, dl)
	}
	return ctx, func() {}
}

// deadline returns the sandbox's own deadline for the call, if it has one.
func (cs *callState) deadline() (time.Time, bool) {
	own := cs.own.Load()
	return time.Unix(0, own), own != 0
}

// sleep is the guest's nanosleep (WASI poll_oneoff with a clock): it returns
// after d, or ends the call when its deadline or its caller's end comes
// first.
func (cs *callState) sleep(d time.Duration) {
	cs.checkExpired()
	t := time.NewTimer(d)
	defer t.Stop()
	var done <-chan struct{}
	if cs.ctx != nil {
		done = cs.ctx.Done()
	}
	select {
	case <-t.C:
	case <-cs.wake:
		panic(errDeadline)
	case <-done:
		cs.expire()
		panic(errDeadline)
	}
}

type callKey struct{}

// callContext is the context an instance's calls run under: the caller's,
// with the instance's callState as a value for host functions. Each
// instance has one, aimed at each call's context in turn, so that a call
// makes no context of its own. Nothing may keep it past the call: what
// outlives a host call (an HTTP request's context, a log record's) is
// given the caller's context itself.
type callContext struct {
	context.Context
	cs *callState
}

// Value returns the call's state for callKey, else the caller's value.
func (c *callContext) Value(key any) any {
	if _, ok := key.(callKey); ok {
		return c.cs
	}
	return c.Context.Value(key)
}

// callFrom returns the call a host function serves, nil outside a call.
func callFrom(ctx context.Context) *callState {
	cs, _ := ctx.Value(callKey{}).(*callState)
	return cs
}
