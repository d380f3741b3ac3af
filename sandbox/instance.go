package sandbox

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/berthhq/berth/wasm/abi"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/sys"
)

// instance is one instantiated copy of a module.
type instance struct {
	m              *Module
	mod            api.Module
	tier           *tier     // the tier it was made on
	c              *compiled // its compiled module, on that tier
	alloc, handle  api.Function
	stdout, stderr *boundedBuffer
	lastUsed       time.Time     // when it last went back to the pool, by the sandbox's clock
	memBytes       atomic.Uint32 // its linear memory then, for Stats (read while in an affinity slot)
	slot           int           // its call's affinity slot (pool.slots), -1 for none
	newBytes       uint32        // its linear memory when made, after _initialize: what growth is measured from
	counted        uint32        // its linear memory as counted in its module's instanceBytes

	// Per-call state, reused by every call the instance serves.
	cs      callState
	ctx     callContext
	timer   *time.Timer        // for the sandbox's own deadlines, made for the first
	aim     *timerAim          // what timer fires at: cs until the instance closes
	cancel  context.CancelFunc // the context of a close-on-done call, if it has one
	own     *callContext       // a close-on-done call's context of its own, during the call
	stack   [2]uint64
	scratch []byte
	mem     *linearMemory // its linear memory (Module.keepSpare)
}

// newInstance instantiates the module on its current tier, running the guest's _initialize
// (Go's runtime and package init) under the module's init deadline, or the
// deadline of the call it is made for when that is earlier (zero: none).
func (m *Module) newInstance(ctx context.Context, deadline time.Time) (*instance, error) {
	return m.makeInstance(ctx, deadline, nil)
}

// makeInstance is newInstance, answering the guest from rp's capsule when
// rp is set (a replay's instance, never pooled).
func (m *Module) makeInstance(ctx context.Context, deadline time.Time, rp *replayer) (*instance, error) {
	t, c, err := m.compiledFor(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidModule, err)
	}
	inst := &instance{
		m:      m,
		slot:   -1,
		tier:   t,
		c:      c,
		stdout: &boundedBuffer{max: m.s.cfg.MaxOutputBytes},
		stderr: &boundedBuffer{max: m.s.cfg.MaxOutputBytes},
	}
	inst.cs.init(m)
	inst.cs.replay = rp
	inst.ctx.cs = &inst.cs
	cfg := wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions(abi.ExportInitialize).
		WithStdout(inst.stdout).
		WithStderr(inst.stderr).
		// The real clocks and crypto/rand, as WithSysWalltime (1 µs),
		// WithSysNanotime (1 ns) and rand.Reader give them, through the
		// instance so that a call's capsule records what the guest was given.
		WithWalltime(inst.cs.walltime, sys.ClockResolution(time.Microsecond.Nanoseconds())).
		WithNanotime(inst.cs.nanotime, sys.ClockResolution(1)).
		WithNanosleep(inst.cs.nanosleep).
		WithOsyield(inst.cs.yield).
		WithRandSource(randSource{&inst.cs})

	// _initialize runs guest code too, so it gets a deadline like any call.
	own := time.Now().Add(m.cfg.InitTimeout)
	if !deadline.IsZero() && deadline.Before(own) {
		own = deadline
	}
	ictx := experimental.WithMemoryAllocator(inst.begin(ctx, nil, Ports{}, own), memoryAllocator{hint: m.memoryHint(),
		limit: uint64(m.cfg.MemoryLimitPages) * wasmPageSize, refused: &inst.cs.refusedGrow, step: &m.growStep,
		spare: &m.spare, made: &inst.mem})
	mod, err := t.rt.r.InstantiateModule(ictx, c.cm, cfg)
	inst.finish()
	expired := inst.cs.expired.Load()
	inst.end()
	if err != nil {
		c.release()
		if expired {
			return nil, fmt.Errorf("%w: _initialize did not finish within %v", ErrABI, m.cfg.InitTimeout)
		}
		return nil, fmt.Errorf("%w: instantiate: %v%s", ErrABI, err, stderrNote(inst.stderr.take()))
	}
	inst.mod = mod
	inst.newBytes = inst.memoryBytes()
	inst.counted = inst.newBytes
	m.instanceBytes.Add(int64(inst.counted))
	m.freshBytes.Store(uint64(inst.newBytes))
	m.instanceOpened()
	inst.alloc = mod.ExportedFunction(abi.ExportAlloc)
	inst.handle = mod.ExportedFunction(abi.ExportHandle)
	inst.stdout.take()
	inst.stderr.take()
	return inst, nil
}

// begin readies the instance for a call of ev (nil: _initialize) and
// returns the context to run it under; finish ends the call's deadline
// machinery. own is the sandbox's own deadline (zero: ctx owns the
// deadline, and no timer runs).
//
// Under the loop guard the call runs under the instance's own callContext,
// aimed at ctx. Under close-on-done, wazero watches the context from a
// goroutine that may outlive the call, and needs it to end at the deadline,
// so the call gets a context of its own (with the sandbox's deadline on it).
func (inst *instance) begin(ctx context.Context, ev *abi.Event, ports Ports, own time.Time) context.Context {
	inst.cs.begin(ctx, ev, ports, own)
	if !own.IsZero() {
		if inst.timer == nil {
			inst.aim = &timerAim{}
			inst.aim.cs.Store(&inst.cs)
			inst.timer = time.AfterFunc(time.Until(own), inst.aim.fire)
		} else {
			inst.timer.Reset(time.Until(own))
		}
	}
	if !inst.tier.rt.key.closeOnDone {
		inst.ctx.Context = ctx
		return &inst.ctx
	}
	inst.own = &callContext{Context: ctx, cs: &inst.cs}
	var cctx context.Context = inst.own
	if !own.IsZero() {
		cctx, inst.cancel = context.WithDeadline(cctx, own)
	}
	return cctx
}

// finish stops the call's deadline machinery once the guest has returned.
func (inst *instance) finish() {
	if inst.timer != nil {
		inst.timer.Stop()
	}
	if inst.cancel != nil {
		inst.cancel()
		inst.cancel = nil
	}
	if inst.own != nil {
		// Its deadline's stopped timer, and wazero's watcher, may hold the
		// context past the call: it no longer leads to the instance.
		inst.own.cs = nil
		inst.own = nil
	}
}

// end drops what the last call referred to.
func (inst *instance) end() {
	inst.cs.end()
	inst.ctx.Context = nil
}

func stderrNote(s string) string {
	if s == "" {
		return ""
	}
	return "; stderr: " + s
}

// call writes the envelope into the guest, runs berth_handle and returns
// the encoded result, in guest memory: valid until the next call into the
// instance.
func (inst *instance) call(ctx context.Context, envelope []byte) ([]byte, error) {
	inst.stack[0] = uint64(len(envelope))
	if err := inst.alloc.CallWithStack(ctx, inst.stack[:]); err != nil {
		return nil, err
	}
	ptr := uint32(inst.stack[0])
	if !inst.mod.Memory().Write(ptr, envelope) {
		return nil, fmt.Errorf("%s returned %#x, outside guest memory", abi.ExportAlloc, ptr)
	}
	inst.stack[0], inst.stack[1] = uint64(ptr), uint64(len(envelope))
	if err := inst.handle.CallWithStack(ctx, inst.stack[:]); err != nil {
		return nil, err
	}
	rptr, rlen := abi.Unpack(inst.stack[0])
	out, ok := inst.mod.Memory().Read(rptr, rlen)
	if !ok {
		return nil, fmt.Errorf("%s returned a result outside guest memory (%#x+%d)", abi.ExportHandle, rptr, rlen)
	}
	return out, nil
}

// memoryBytes returns the instance's current linear memory size.
func (inst *instance) memoryBytes() uint32 {
	if mem := inst.mod.Memory(); mem != nil {
		return mem.Size()
	}
	return 0
}

func (inst *instance) close() {
	inst.finish()
	if inst.aim != nil {
		inst.aim.cs.Store(nil) // the stopped timer no longer holds the instance
	}
	if inst.mod != nil {
		inst.mod.Close(context.Background())
		inst.m.live.Add(-1)
		inst.m.instanceBytes.Add(-int64(inst.counted))
	}
	inst.c.release()
}

// timerAim is what an instance's deadline timer fires at: its call state
// while the instance lives, nothing once it is closed. A stopped timer
// stays in the runtime's timer heap until the runtime next cleans it, and
// one that fired at the call state itself held the closed instance there
// with all it refers to: its wazero module and, on the interpreter, the
// module's form (~72 MB of heap for a Go guest, let go at an upload:
// letFormsGo). Six uploads one after another found one or two such forms
// alive in a third of their runs, and the heap grew past them into new
// pages (issue 32).
type timerAim struct{ cs atomic.Pointer[callState] }

func (a *timerAim) fire() {
	if cs := a.cs.Load(); cs != nil {
		cs.fire()
	}
}
