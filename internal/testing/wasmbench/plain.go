// Package wasmbench is what the call-cost benchmarks of several packages
// share: plain wazero running a guest with nothing of the host around it (the
// baseline every sandboxed call is compared with), bursts of calls over one
// or two goroutines, and the process's CPU time. It is used by tests only.
package wasmbench

import (
	"context"
	"crypto/rand"
	"errors"
	"testing"

	"github.com/berthhq/berth/wasm/abi"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// PlainGuest is the baseline of the call-cost benchmarks: a module on plain
// wazero with nothing of the sandbox around it (no loop guard, no deadline,
// no pool, no output capture) and host functions that answer nothing. What
// a sandboxed call costs beyond it is the host's.
type PlainGuest struct {
	r  wazero.Runtime
	cm wazero.CompiledModule
}

// NewPlainGuest compiles wasm on a runtime of its own (compiled code, the
// compilation cache in cacheDir), closed when tb ends.
func NewPlainGuest(tb testing.TB, wasm []byte, cacheDir string) *PlainGuest {
	tb.Helper()
	return NewPlainGuestOn(tb, wasm, wazero.NewRuntimeConfigCompiler(), cacheDir)
}

// NewPlainGuestOn is NewPlainGuest on a runtime of the given kind (the
// compiler's or the interpreter's), with its compilation cache in cacheDir
// ("" for none). What it times from its start to its return is plain
// wazero's deploy: a runtime, its host modules and the module's compile.
func NewPlainGuestOn(tb testing.TB, wasm []byte, rc wazero.RuntimeConfig, cacheDir string) *PlainGuest {
	tb.Helper()
	ctx := context.Background()
	rc = rc.WithMemoryLimitPages(1024)
	var cache wazero.CompilationCache
	if cacheDir != "" {
		var err error
		if cache, err = wazero.NewCompilationCacheWithDir(cacheDir); err != nil {
			tb.Fatal(err)
		}
		rc = rc.WithCompilationCache(cache)
	}
	r := wazero.NewRuntimeWithConfig(ctx, rc)
	tb.Cleanup(func() {
		r.Close(ctx)
		if cache != nil {
			cache.Close(ctx)
		}
	})
	wasi_snapshot_preview1.MustInstantiate(ctx, r)
	const i32, i64 = api.ValueTypeI32, api.ValueTypeI64
	hb := r.NewHostModuleBuilder(abi.HostModule)
	none := api.GoModuleFunc(func(context.Context, api.Module, []uint64) {})
	noReply := api.GoModuleFunc(func(_ context.Context, _ api.Module, stack []uint64) { stack[0] = api.EncodeI64(abi.ErrBadRequest) })
	hb.NewFunctionBuilder().WithGoModuleFunction(none, []api.ValueType{i32, i32, i32}, nil).Export(abi.ImportLog)
	hb.NewFunctionBuilder().WithGoModuleFunction(noReply, []api.ValueType{i32, i32}, []api.ValueType{i32}).Export(abi.ImportTakeReply)
	for _, name := range abi.HostImports {
		if name != abi.ImportLog && name != abi.ImportTakeReply {
			hb.NewFunctionBuilder().WithGoModuleFunction(noReply, []api.ValueType{i32, i32}, []api.ValueType{i64}).Export(name)
		}
	}
	if _, err := hb.Instantiate(ctx); err != nil {
		tb.Fatal(err)
	}
	cm, err := r.CompileModule(ctx, wasm)
	if err != nil {
		tb.Fatal(err)
	}
	return &PlainGuest{r: r, cm: cm}
}

// PlainInstance is one instance of a PlainGuest, for one goroutine at a time.
type PlainInstance struct {
	mod           api.Module
	alloc, handle api.Function
	stack         [2]uint64
	envelope      []byte
}

// Instance instantiates the guest (running its _initialize).
func (g *PlainGuest) Instance(tb testing.TB) *PlainInstance {
	tb.Helper()
	cfg := wazero.NewModuleConfig().WithName("").WithStartFunctions(abi.ExportInitialize).
		WithSysWalltime().WithSysNanotime().WithRandSource(rand.Reader)
	mod, err := g.r.InstantiateModule(context.Background(), g.cm, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return &PlainInstance{mod: mod, alloc: mod.ExportedFunction(abi.ExportAlloc), handle: mod.ExportedFunction(abi.ExportHandle)}
}

// Call does what a host must do for one event and no more: encode it, copy
// it in, run berth_handle and decode the result.
func (pi *PlainInstance) Call(ctx context.Context, ev *abi.Event) error {
	pi.envelope = abi.AppendEvent(pi.envelope[:0], ev)
	pi.stack[0] = uint64(len(pi.envelope))
	if err := pi.alloc.CallWithStack(ctx, pi.stack[:]); err != nil {
		return err
	}
	ptr := uint32(pi.stack[0])
	pi.mod.Memory().Write(ptr, pi.envelope)
	pi.stack[0], pi.stack[1] = uint64(ptr), uint64(len(pi.envelope))
	if err := pi.handle.CallWithStack(ctx, pi.stack[:]); err != nil {
		return err
	}
	out, _ := pi.mod.Memory().Read(abi.Unpack(pi.stack[0]))
	res, err := abi.DecodeResult(out)
	if err == nil && res.Status != abi.StatusOK {
		err = errors.New(res.Failure.Message)
	}
	return err
}
