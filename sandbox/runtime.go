package sandbox

import (
	"context"
	"fmt"

	"github.com/berthhq/berth/wasm/abi"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// runtimeKey selects a wazero runtime: the close-on-done switch and the
// engine (interpreter or compiler) are runtime-wide settings in wazero, so
// modules that differ in them need runtimes of their own. Modules alike
// share one. The memory limit is no longer wazero's (its instances'
// allocator holds it, memory.go), but stays in the key so that runtimes
// and compiled code are kept apart as the compile cache keys them. Both
// tiers of a module get the same switch and limit, and the same host
// functions: a deadline, the loop guard and the memory limit hold alike
// on either.
type runtimeKey struct {
	memoryPages uint32
	closeOnDone bool
	interpreter bool
}

// runtime is a wazero runtime with WASI and the berth host module in it.
type runtime struct {
	key runtimeKey
	r   wazero.Runtime
}

// runtimeFor returns the runtime for key, creating it on first use.
func (s *Sandbox) runtimeFor(ctx context.Context, key runtimeKey) (*runtime, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	if rt, ok := s.runtimes[key]; ok {
		return rt, nil
	}
	rc := wazero.NewRuntimeConfigCompiler()
	if key.interpreter {
		rc = wazero.NewRuntimeConfigInterpreter()
	}
	// The module's memory limit is its instances' allocator's (memory.go),
	// which sees the grows it refuses; wazero's own is the most there is.
	rc = rc.WithMemoryLimitPages(abi.MaxMemoryPages).WithCloseOnContextDone(key.closeOnDone)
	if s.cache != nil && !key.interpreter {
		rc = rc.WithCompilationCache(s.cache)
	}
	r := wazero.NewRuntimeWithConfig(ctx, rc)
	if err := instantiateWASI(ctx, r); err != nil {
		r.Close(ctx)
		return nil, err
	}
	if err := s.instantiateHost(ctx, r); err != nil {
		r.Close(ctx)
		return nil, err
	}
	rt := &runtime{key: key, r: r}
	s.runtimes[key] = rt
	return rt, nil
}

// instantiateWASI provides wasi_snapshot_preview1. Its sched_yield, where
// the loop guard reaches the host, calls each instance's own yield
// (callState.yield, set with WithOsyield), which ends a call whose deadline
// has passed.
func instantiateWASI(ctx context.Context, r wazero.Runtime) error {
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, r); err != nil {
		return fmt.Errorf("sandbox: instantiate WASI: %w", err)
	}
	return nil
}
