package sandbox

import (
	"context"
	"errors"
	goruntime "runtime"
	"time"

	"github.com/tetratelabs/wazero/experimental"
)

// The tiers a module's instances run on.
const (
	// TierInterpreter is wazero's interpreter: the module is ready in a
	// fraction of the compile's time, and each call is slower.
	TierInterpreter = "interpreter"
	// TierCompiled is wazero's optimizing compiler: machine code.
	TierCompiled = "compiled"
)

// TieringMode selects how a module whose compiled code is not cached starts.
type TieringMode int

const (
	// CompiledOnly (the zero value) compiles every module before Load
	// returns: a cold start pays the whole compile (seconds for a Go guest),
	// and every call runs at full speed. (The host's sandbox.tier-up
	// defaults to TierUp; a timeout on the interpreter is reported
	// WarmingUp there, which the engine does not charge.)
	CompiledOnly TieringMode = iota
	// TierUp starts a module on the interpreter at once and compiles it in
	// the background; when the compile is done, new instances run the
	// compiled code, idle interpreter instances are closed and the others as
	// they come back from their calls. One module compiles at a time in the
	// background, giving way to Loads; the others wait on the interpreter. A
	// module whose compiled code is cached (in memory, or on disk from an
	// earlier run) starts compiled.
	TierUp
)

// tier is what a module's new instances are made from: a runtime and, on
// the interpreter, the module compiled for it. The compiled tier's module
// lives in the sandbox's compilation cache instead (interp is nil).
type tier struct {
	name   string
	rt     *runtime
	interp *compiled // the module holds one reference until it tiers up or closes
	// cold marks an interpreter tier whose form the module let go while it
	// waited for its compile (Module.letFormGo): interp is nil, and the
	// next instance compiles the form again (Module.reform).
	cold bool
}

// interpreted says whether t is the interpreter, its form held or not.
func (t *tier) interpreted() bool { return t.interp != nil || t.cold }

// Tier says which tier the module's new instances run on: TierInterpreter
// until its background compile is done, then TierCompiled.
func (m *Module) Tier() string { return m.tier.Load().name }

// compiledFor returns the tier new instances are made on and a reference
// to its compiled module, which the caller must release.
func (m *Module) compiledFor(ctx context.Context) (*tier, *compiled, error) {
	for {
		t := m.tier.Load()
		if t.cold {
			if err := m.reform(ctx, t); err != nil {
				return nil, nil, err
			}
			continue
		}
		if t.interp == nil {
			c, err := m.s.comp.get(ctx, m.cacheKey, t.rt, m.code)
			return t, c, err
		}
		if t.interp.acquire() {
			return t, t.interp, nil
		}
		if m.tier.Load() == t {
			// Released without a switch: the module was closed.
			return nil, nil, ErrClosed
		}
		// Tiered up between the load and the acquire: take the new tier.
	}
}

// warmingUp returns, for a Timeout of a call on tier t (nil: it got no
// instance, so the module's tier now), the channel closed when the module's
// background compile has ended; nil when t is compiled, when no compile is
// under way, or when the compile ended without a switch (it failed, or the
// module closed): then the interpreter is what the module runs, and its
// timeouts are the handler's.
func (m *Module) warmingUp(t *tier) <-chan struct{} {
	if t == nil {
		t = m.tier.Load()
	}
	if !t.interpreted() || m.tierDone == nil {
		return nil
	}
	select {
	case <-m.tierDone:
		if m.tier.Load().interpreted() {
			return nil
		}
	default:
	}
	return m.tierDone
}

// stale says whether inst runs on a tier the module has left; such an
// instance is closed when it comes back from its call, never reused.
func (m *Module) stale(inst *instance) bool { return inst.tier != m.tier.Load() }

// compileWorkers is how many goroutines the background compile uses. wazero
// looks at the context's cancellation only when it compiles with more than
// one, so at least two, that closing a module mid-compile ends the compile;
// at most half the processors, so that calls on the interpreter go on.
func compileWorkers() int { return max(2, goruntime.GOMAXPROCS(0)/2) }

// tierUp compiles the module with the optimizing compiler on rt and, when
// that is done, moves new instances onto the compiled code (idle interpreter
// instances are closed at once, the others as they come back from a call).
// The compile waits for the sandbox's compile slot and for the foreground
// to be quiet, and gives way to a Load (foreground.go). It ends early,
// without switching, when ctx is cancelled (the module or the sandbox
// closing). A failed compile, which should not happen to a module the
// interpreter accepted, is logged, and the module stays on the interpreter.
func (m *Module) tierUp(ctx context.Context, rt *runtime) {
	defer close(m.tierDone)
	c, err := m.compileInBackground(ctx, rt)
	if err != nil {
		if ctx.Err() == nil && !errors.Is(err, ErrClosed) {
			m.s.cfg.Logger.Error("background compile failed; the module stays on the interpreter", "module", m.name, "err", err.Error())
		}
		return
	}
	c.release() // the cache keeps its reference; each instance takes its own
	if !passGate(ctx, m.s.cfg.tierUpGate) || ctx.Err() != nil {
		return
	}
	m.s.marks.mark(m.cacheKey)
	m.tierMu.Lock()
	from := m.tier.Swap(&tier{name: TierCompiled, rt: rt})
	m.tierMu.Unlock()
	if from.interp != nil { // nil: it was let go (letFormGo)
		from.interp.release()
	}
	// The idle interpreter instances go now, not when a call or the idle
	// release reaches them: each holds the interpreter's form, the largest
	// thing a module has, which goes (and back to the OS) with the last of
	// them. A call in flight on one closes it when it comes back.
	m.pool.drop(m.stale, &m.pool.counts.tierUp)
}

// compileInBackground compiles the module on rt in the sandbox's compile
// slot once the foreground is quiet, again after each Load that cancelled
// it, until those cancels cost it maxGivenWay; it returns the referenced
// compiled module.
func (m *Module) compileInBackground(ctx context.Context, rt *runtime) (*compiled, error) {
	fg := m.s.fg
	var lost time.Duration // compiling time a Load's cancel threw away
	for {
		if !fg.waitQuiet(ctx) || !m.s.takeCompileSlot(ctx) {
			return nil, ctx.Err()
		}
		cctx, cancel := context.WithCancel(ctx)
		stop := cancel
		if lost >= maxGivenWay {
			stop = nil // it has given way enough: it runs to its end
		}
		if !fg.start(stop) {
			cancel()
			m.s.giveCompileSlot()
			continue // a Load began while it waited for the slot
		}
		began := time.Now()
		c, err := m.s.comp.get(experimental.WithCompilationWorkers(cctx, compileWorkers()), m.cacheKey, rt, m.code)
		fg.done()
		m.s.giveCompileSlot()
		preempted := err != nil && cctx.Err() != nil && ctx.Err() == nil
		cancel()
		if !preempted {
			return c, err
		}
		lost += time.Since(began)
	}
}

// takeCompileSlot waits for the sandbox's one background compile slot
// (Sandbox.compileSlot); false if ctx ended first.
func (s *Sandbox) takeCompileSlot(ctx context.Context) bool {
	select {
	case s.compileSlot <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

// giveCompileSlot gives the slot back to the next background compile.
func (s *Sandbox) giveCompileSlot() { <-s.compileSlot }
