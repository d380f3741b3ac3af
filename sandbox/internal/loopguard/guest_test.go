package loopguard

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/testbuild"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// spinGuest builds testdata/spin once per test binary with the real Go
// toolchain (GOOS=wasip1 GOARCH=wasm -buildmode=c-shared), so that the tests
// rewrite what Berth actually runs. testdata is ignored by ./..., but a
// package under it can still be built by explicit path.
var spinGuest = sync.OnceValues(func() ([]byte, error) { return testbuild.Bytes("sandbox/internal/loopguard/testdata/spin") })

func guest(tb testing.TB) []byte {
	tb.Helper()
	wasm, err := spinGuest()
	if err != nil {
		tb.Fatal(err)
	}
	return wasm
}

// deadlineYield is the host's sched_yield as Berth means to implement it: it
// ends the call by panicking once the call's deadline has passed. wazero
// recovers the panic and returns it, wrapped, from the export's Call.
func deadlineYield(ctx context.Context, _ api.Module, stack []uint64) {
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		panic(context.DeadlineExceeded)
	}
	if err := ctx.Err(); err != nil {
		panic(err)
	}
	stack[0] = 0 // errno success
}

// newRuntime returns a runtime with WASI instantiated, except that
// sched_yield is replaced by yield when yield is not nil. wazero's
// hostModuleBuilder keeps one function per export name, so a later Export of
// "sched_yield" replaces the one ExportFunctions added (builder.go,
// ExportHostFunc; NewFunctionExporter documents this use).
func newRuntime(tb testing.TB, cfg wazero.RuntimeConfig, yield api.GoModuleFunc) wazero.Runtime {
	tb.Helper()
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, cfg)
	tb.Cleanup(func() { r.Close(ctx) })
	b := r.NewHostModuleBuilder(wasi_snapshot_preview1.ModuleName)
	wasi_snapshot_preview1.NewFunctionExporter().ExportFunctions(b)
	if yield != nil {
		b.NewFunctionBuilder().
			WithGoModuleFunction(yield, nil, []api.ValueType{api.ValueTypeI32}).
			Export("sched_yield")
	}
	if _, err := b.Instantiate(ctx); err != nil {
		tb.Fatal(err)
	}
	return r
}

// instantiate compiles wasm and creates a reactor instance the way Berth
// does: _initialize as the start function, real clocks and sleep.
func instantiate(tb testing.TB, r wazero.Runtime, wasm []byte) api.Module {
	tb.Helper()
	ctx := context.Background()
	cm, err := r.CompileModule(ctx, wasm)
	if err != nil {
		tb.Fatal(err)
	}
	cfg := wazero.NewModuleConfig().WithName("").
		WithStartFunctions("_initialize").WithSysNanotime().WithSysWalltime().WithSysNanosleep()
	m, err := r.InstantiateModule(ctx, cm, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { m.Close(ctx) })
	return m
}

func rewriteGuest(tb testing.TB, opts Options) *Result {
	tb.Helper()
	res, err := Rewrite(guest(tb), opts)
	if err != nil {
		tb.Fatal(err)
	}
	return res
}
