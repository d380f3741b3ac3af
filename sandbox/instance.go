package sandbox

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/berthhq/berth/wasm/abi"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// instance is one instantiated copy of a module.
type instance struct {
	m              *Module
	mod            api.Module
	c              *compiled
	alloc, handle  api.Function
	stdout, stderr *boundedBuffer
	current        atomic.Pointer[callState] // the call being served, for nanosleep
	lastUsed       time.Time                 // when it last went back to the pool, by the sandbox's clock
	memBytes       uint32                    // its linear memory then, for Stats
	stack          [2]uint64
	scratch        []byte
}

// newInstance instantiates the module, running the guest's _initialize
// (Go's runtime and package init) under the module's init deadline.
func (m *Module) newInstance(ctx context.Context) (*instance, error) {
	c, err := m.s.comp.get(ctx, m.cacheKey, m.rt, m.code)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidModule, err)
	}
	inst := &instance{
		m:      m,
		c:      c,
		stdout: &boundedBuffer{max: m.s.cfg.MaxOutputBytes},
		stderr: &boundedBuffer{max: m.s.cfg.MaxOutputBytes},
	}
	cfg := wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions(abi.ExportInitialize).
		WithStdout(inst.stdout).
		WithStderr(inst.stderr).
		WithSysWalltime().
		WithSysNanotime().
		WithNanosleep(inst.nanosleep).
		WithRandSource(rand.Reader)

	// _initialize runs guest code too, so it gets a deadline like any call.
	cs := newCallState(m, nil)
	inst.current.Store(cs)
	ictx, cancel := context.WithTimeout(withCall(ctx, cs), m.cfg.InitTimeout)
	stop := context.AfterFunc(ictx, cs.expire)
	mod, err := m.rt.r.InstantiateModule(ictx, c.cm, cfg)
	stop()
	cancel()
	inst.current.Store(nil)
	if err != nil {
		c.release()
		if cs.expired.Load() {
			return nil, fmt.Errorf("%w: _initialize did not finish within %v", ErrABI, m.cfg.InitTimeout)
		}
		return nil, fmt.Errorf("%w: instantiate: %v%s", ErrABI, err, stderrNote(inst.stderr.take()))
	}
	inst.mod = mod
	m.instanceOpened()
	inst.alloc = mod.ExportedFunction(abi.ExportAlloc)
	inst.handle = mod.ExportedFunction(abi.ExportHandle)
	inst.stdout.take()
	inst.stderr.take()
	return inst, nil
}

func stderrNote(s string) string {
	if s == "" {
		return ""
	}
	return "; stderr: " + s
}

// nanosleep is the instance's WASI sleep: bound to the current call, so a
// sleeping guest (time.Sleep, a timer in a select) ends at the deadline.
func (inst *instance) nanosleep(ns int64) {
	if cs := inst.current.Load(); cs != nil {
		cs.sleep(time.Duration(ns))
		return
	}
	time.Sleep(time.Duration(ns))
}

// call writes the envelope into the guest, runs berth_handle and returns a
// copy of the encoded result.
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
	return append([]byte(nil), out...), nil
}

// memoryBytes returns the instance's current linear memory size.
func (inst *instance) memoryBytes() uint32 {
	if mem := inst.mod.Memory(); mem != nil {
		return mem.Size()
	}
	return 0
}

func (inst *instance) close() {
	if inst.mod != nil {
		inst.mod.Close(context.Background())
		inst.m.live.Add(-1)
	}
	inst.c.release()
}
