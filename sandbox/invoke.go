package sandbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/berthhq/berth/wasm/abi"
	"github.com/tetratelabs/wazero/sys"
)

// Invoke runs the handler named in ev once and reports how it went. It never
// panics on guest behaviour.
//
// The call's deadline has one owner. When ctx carries a deadline (the
// engine's attempt deadline, which it sets on its own clock), the caller owns
// it and the sandbox only observes it: no timer of its own is started, and
// the guest is stopped when ctx ends. Otherwise (a direct call: tests,
// hostspec) the sandbox owns a deadline of timeout from now (zero: none),
// on the instance's one timer. A timeout shorter than ctx's deadline is the
// one exception: the earlier of the two is enforced, by the sandbox.
//
// How the call ended decides the outcome: a deadline that passed (either
// owner's) is a Timeout; a ctx cancelled before its deadline (the host
// shutting down, an operator's reset or removal) is Canceled.
func (m *Module) Invoke(ctx context.Context, ev *abi.Event, timeout time.Duration) Outcome {
	return m.InvokeWith(ctx, ev, timeout, Ports{})
}

// InvokeWith is Invoke with host-side ports for the call (a projection's
// key/value store).
//
// A call allocates nothing of its own on the way (the instance's state, its
// context and its timer are reused); what a call's outcome carries (a
// failure's text, a saga's commands) is the caller's to keep.
func (m *Module) InvokeWith(ctx context.Context, ev *abi.Event, timeout time.Duration, ports Ports) Outcome {
	start := time.Now()
	own, budget := callDeadline(ctx, start, timeout, ev)
	if ctx.Err() != nil {
		// Ended before it began: no instance is taken, no guest code runs.
		return m.noInstance(ctx, start, own, budget, "before it started", ctx.Err())
	}
	if m.warming.Load() {
		if err := m.awaitWarm(ctx, own); err != nil {
			return m.noInstance(ctx, start, own, budget, "while its first instance was made", err)
		}
	}
	inst, err := m.pool.acquire(ctx, own)
	if err != nil {
		return m.noInstance(ctx, start, own, budget, "while waiting for a free instance", err)
	}
	o := m.run(ctx, inst, ev, ports, own, budget)
	// The monotonic clock alone (one read where time.Now makes two): the
	// end is start's reading moved on by it.
	o.Duration = time.Since(start)
	end := start.Add(o.Duration)
	inst.end()
	m.pool.putAt(inst, o.Kind != Success && o.Kind != GuestFailure, end)
	return o
}

// run calls ev on inst and returns the outcome, with its capsule when the
// call failed (in a replay: always, whole). The caller ends inst's call.
func (m *Module) run(ctx context.Context, inst *instance, ev *abi.Event, ports Ports, own time.Time, budget time.Duration) Outcome {
	cctx := inst.begin(ctx, ev, ports, own)
	inst.scratch = abi.AppendEvent(inst.scratch[:0], ev)
	raw, callErr := inst.call(cctx, inst.scratch)
	inst.finish()
	stderr := inst.stderr.take()
	// raw is in guest memory: decode it before anything runs the guest again.
	o := m.outcome(ctx, inst, budget, raw, callErr, stderr)
	stdout := inst.stdout.take()
	m.logOutput(ev, stdout, stderr)
	if at := inst.cs.firedAt.Load(); o.Kind == Timeout && at != 0 {
		o.Overrun = time.Since(time.Unix(0, at))
	}
	o.Tier = inst.tier.name
	if o.Kind == Timeout {
		o.WarmingUp = m.warmingUp(inst.tier)
	}
	o.Observed = inst.cs.observed
	if o.Kind == Success {
		o.Commands = inst.cs.commands
	}
	if replay := inst.cs.replay != nil; failed(o.Kind) || replay {
		o.Capsule = m.capsule(inst, ev, budget, &o, stdout, !replay)
	}
	return o
}

// noInstance is the outcome of a call that got no instance: a Timeout or
// Canceled when a deadline (ctx's or own, the sandbox's) or the caller
// ended the wait, or the making of the instance; else a Trap.
func (m *Module) noInstance(ctx context.Context, start, own time.Time, budget time.Duration, where string, err error) Outcome {
	o := Outcome{Kind: Trap, Message: "no instance: " + err.Error()}
	if ctx.Err() != nil || (!own.IsZero() && !time.Now().Before(own)) {
		o = m.expiredOutcome(ctx, budget, where)
	}
	if o.Kind == Timeout {
		// Waited out its deadline for an instance: while the module warms
		// up, the instances are the interpreter's, slow to come back.
		o.WarmingUp = m.warmingUp(nil)
	}
	o.Duration = time.Since(start)
	return o
}

func (m *Module) outcome(ctx context.Context, inst *instance, timeout time.Duration, raw []byte, callErr error, stderr string) Outcome {
	if callErr == nil {
		res, err := abi.DecodeResult(raw)
		if err != nil {
			return Outcome{Kind: Trap, Message: "the guest returned a result that does not decode: " + err.Error(), Stderr: stderr}
		}
		if res.Status == abi.StatusOK {
			return Outcome{Kind: Success, Stderr: stderr}
		}
		return Outcome{Kind: GuestFailure, Failure: res.Failure, Stderr: stderr}
	}
	// The host's own view decides "timed out": after a deadline the guest's
	// error may read "unreachable" or "module closed", which says nothing.
	// Under close-on-done wazero itself stops a call whose ctx ended, so ctx
	// is asked as well as the flag, and so is the exit wazero gives a call
	// whose own context passed its deadline (the sandbox's, on it): that
	// context's timer and the instance's race, and either may fire first.
	var exit *sys.ExitError
	if inst.tier.rt.key.closeOnDone && errors.As(callErr, &exit) && exit.ExitCode() == sys.ExitCodeDeadlineExceeded {
		inst.cs.expire() // the host saw it now
	}
	if inst.cs.expired.Load() || ctx.Err() != nil {
		o := m.expiredOutcome(ctx, timeout, "")
		o.Stderr = stderr
		return o
	}
	switch {
	case errors.Is(callErr, errBadPointer):
		return Outcome{Kind: Trap, Message: errBadPointer.Error(), Stderr: stderr}
	case inst.cs.refusedGrow.Load() > 0:
		// The host refused a memory.grow past the limit in this call, and
		// the guest stopped: whatever it printed (Go: "out of memory",
		// Rust: "memory allocation of N bytes failed", or nothing), that
		// is why.
		return Outcome{Kind: MemoryExceeded, Message: fmt.Sprintf("the guest needed more than its memory limit of %d pages (%d MiB): the host refused to grow its memory to %d pages",
			m.cfg.MemoryLimitPages, m.cfg.MemoryLimitPages/16, inst.cs.refusedGrow.Load()/wasmPageSize), Stderr: stderr}
	case strings.Contains(stderr, "out of memory") || uint64(inst.memoryBytes()) >= uint64(m.cfg.MemoryLimitPages-1)*65536:
		return Outcome{Kind: MemoryExceeded, Message: fmt.Sprintf("the guest needed more than its memory limit of %d pages (%d MiB)", m.cfg.MemoryLimitPages, m.cfg.MemoryLimitPages/16), Stderr: stderr}
	case errors.As(callErr, &exit):
		return Outcome{Kind: Trap, Message: fmt.Sprintf("the guest exited with code %d", exit.ExitCode()), Stderr: stderr}
	}
	return Outcome{Kind: Trap, Message: trapMessage(callErr, stderr), Stderr: stderr}
}

// callDeadline returns the sandbox's own deadline for a call (zero when
// ctx owns it, or there is none) and the call's time budget (for messages),
// and sets ev's deadline: ctx's own deadline when it has one no later than
// start+timeout (the caller owns it), else start+timeout (timeout zero and
// no deadline on ctx: none).
func callDeadline(ctx context.Context, start time.Time, timeout time.Duration, ev *abi.Event) (time.Time, time.Duration) {
	deadline, has := ctx.Deadline()
	if timeout > 0 && (!has || start.Add(timeout).Before(deadline)) {
		own := start.Add(timeout)
		ev.DeadlineUnixNano = own.UnixNano()
		return own, timeout
	}
	if has {
		ev.DeadlineUnixNano = deadline.UnixNano()
		timeout = max(deadline.Sub(start), 0)
		if timeout > time.Millisecond {
			timeout = timeout.Round(time.Millisecond)
		}
	}
	return time.Time{}, timeout
}

// expiredOutcome says how a call that its context ended went: Canceled when
// the caller cancelled ctx before any deadline passed, else Timeout (the
// sandbox's deadline, or the caller's, which ctx reports as
// context.DeadlineExceeded).
func (m *Module) expiredOutcome(ctx context.Context, timeout time.Duration, where string) Outcome {
	if errors.Is(ctx.Err(), context.Canceled) {
		msg := "the caller canceled the call"
		if where != "" {
			msg += " " + where
		}
		if cause := context.Cause(ctx); cause != nil && cause != context.Canceled {
			msg += ": " + cause.Error()
		}
		return Outcome{Kind: Canceled, Message: msg}
	}
	msg := fmt.Sprintf("the call ran past its %v deadline", timeout)
	if where != "" {
		msg += " " + where
	}
	return Outcome{Kind: Timeout, Message: msg}
}

// trapMessage prefers the guest's own panic text to wazero's trap text.
func trapMessage(err error, stderr string) string {
	if i := strings.Index(stderr, "panic: "); i >= 0 {
		return firstLines(stderr[i:], 3)
	}
	if i := strings.Index(stderr, "fatal error: "); i >= 0 {
		return firstLines(stderr[i:], 3)
	}
	return firstLines(err.Error(), 1)
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}

func (m *Module) logOutput(ev *abi.Event, stdout, stderr string) {
	for _, out := range []struct{ stream, text string }{{"stdout", stdout}, {"stderr", stderr}} {
		if out.text != "" {
			m.s.cfg.Logger.Info("guest output", "module", m.name, "key", ev.InvocationKey, "stream", out.stream, "text", out.text)
		}
	}
}
