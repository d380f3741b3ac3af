package loopguard

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// sumWant is what the guest's sum(n) returns: the sum of 3i+1 for i < n.
func sumWant(n int64) int64 { return 3*n*(n-1)/2 + n }

func TestGuestSumUnchanged(t *testing.T) {
	ctx := context.Background()
	plain := instantiate(t, newRuntime(t, wazero.NewRuntimeConfig(), nil), guest(t))
	for _, interval := range []int32{0, 1, 7, 1 << 30} {
		res := rewriteGuest(t, Options{Interval: interval})
		var yields atomic.Int64
		counting := func(ctx context.Context, m api.Module, stack []uint64) {
			yields.Add(1)
			deadlineYield(ctx, m, stack)
		}
		guarded := instantiate(t, newRuntime(t, wazero.NewRuntimeConfig(), counting), res.Module)
		for _, n := range []int32{0, 1, 1000, 1_000_000} {
			t.Run(fmt.Sprintf("interval=%d/n=%d", interval, n), func(t *testing.T) {
				before, err := plain.ExportedFunction("sum").Call(ctx, api.EncodeI32(n))
				if err != nil {
					t.Fatal(err)
				}
				callCtx, cancel := context.WithTimeout(ctx, time.Minute)
				defer cancel()
				after, err := guarded.ExportedFunction("sum").Call(callCtx, api.EncodeI32(n))
				if err != nil {
					t.Fatal(err)
				}
				if int64(before[0]) != sumWant(int64(n)) || after[0] != before[0] {
					t.Fatalf("sum(%d): plain %d, rewritten %d, want %d", n, int64(before[0]), int64(after[0]), sumWant(int64(n)))
				}
			})
		}
		t.Logf("interval %d: %d loops in %d functions, %d sched_yield calls", interval, res.Loops, res.Functions, yields.Load())
	}
}

func TestGuestResult(t *testing.T) {
	wasm := guest(t)
	res := rewriteGuest(t, Options{})
	// Go's wasip1 runtime imports sched_yield first; the rewriter found it.
	if res.YieldIndex != 0 {
		t.Errorf("YieldIndex = %d, want 0", res.YieldIndex)
	}
	if res.Loops == 0 || res.Functions == 0 || res.Loops < res.Functions/2 {
		t.Errorf("implausible counts: %d loops in %d functions", res.Loops, res.Functions)
	}
	// The only growth is one global and the guards (minus dropped sections).
	g := guard(DefaultInterval, res.CounterGlobal, res.YieldIndex)
	if grow := len(res.Module) - len(wasm); grow < res.Loops*len(g) {
		t.Errorf("module grew by %d bytes for %d guards of %d bytes", grow, res.Loops, len(g))
	}
	assertSectionsKept(t, wasm, res.Module)
	if _, err := wazero.NewRuntime(context.Background()).CompileModule(context.Background(), res.Module); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d bytes -> %d bytes, %d loops in %d functions, counter global %d", len(wasm), len(res.Module), res.Loops, res.Functions, res.CounterGlobal)
}

// assertSectionsKept checks that every section of in other than global, code,
// data (mergeData's: datamerge_test.go) and offset-dependent custom sections
// is in out, byte for byte, in order.
func assertSectionsKept(t *testing.T, in, out []byte) {
	t.Helper()
	a, err := splitSections(in)
	if err != nil {
		t.Fatal(err)
	}
	b, err := splitSections(out)
	if err != nil {
		t.Fatal(err)
	}
	var want, got [][]byte
	for _, s := range a {
		if s.id != secGlobal && s.id != secCode && s.id != secData && !(s.id == secCustom && offsetDependent(s.name)) {
			want = append(want, s.raw)
		}
	}
	for _, s := range b {
		if s.id != secGlobal && s.id != secCode && s.id != secData {
			got = append(got, s.raw)
		}
	}
	if len(want) != len(got) {
		t.Fatalf("kept %d sections, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(want[i], got[i]) {
			t.Fatalf("section %d (id %d) changed", i, want[i][0])
		}
	}
}

// TestGuestSpinStopped shows the point of the package: a guest spinning in
// for {} is stopped by the host's sched_yield after its deadline. How soon
// is a figure, not an assertion (a loaded machine delays any thread): the
// test logs it, and BenchmarkCancel in package sandbox measures it. What the
// test asserts is that the guest is stopped at all, which an unguarded
// for {} never is.
func TestGuestSpinStopped(t *testing.T) {
	res := rewriteGuest(t, Options{})
	r := newRuntime(t, wazero.NewRuntimeConfig(), deadlineYield)
	const timeout = 50 * time.Millisecond
	var worst time.Duration
	for i := range 5 {
		m := instantiate(t, r, res.Module) // a stopped guest is not reused
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		dl, _ := ctx.Deadline()
		_, err := m.ExportedFunction("spin").Call(ctx)
		late := time.Since(dl)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("spin returned %v, want the deadline panic", err)
		}
		t.Logf("run %d: stopped %v after the deadline", i, late)
		worst = max(worst, late)
	}
	if worst > time.Second {
		t.Fatalf("stopped %v after the deadline: the guard did not stop the guest", worst)
	}
}

// TestGuestSpinGC shows why the guard calls the host rather than setting a
// flag: while a rewritten guest spins, a Go garbage collection (which must
// stop every goroutine, including the one running the guest) completes,
// because the guest returns to Go every Interval loop passes.
func TestGuestSpinGC(t *testing.T) {
	res := rewriteGuest(t, Options{})
	// The guest is spinning once its guard has called sched_yield during
	// the call: the GC below must then run while it spins, not before.
	var calling atomic.Bool
	spinning := make(chan struct{})
	var once sync.Once
	yield := func(ctx context.Context, m api.Module, stack []uint64) {
		if calling.Load() {
			once.Do(func() { close(spinning) })
		}
		deadlineYield(ctx, m, stack)
	}
	m := instantiate(t, newRuntime(t, wazero.NewRuntimeConfig(), yield), res.Module)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	done := make(chan error, 1)
	calling.Store(true)
	go func() {
		_, err := m.ExportedFunction("spin").Call(ctx)
		done <- err
	}()
	select {
	case <-spinning:
	case err := <-done:
		t.Fatalf("spin returned %v before its guard yielded", err)
	}
	start := time.Now()
	runtime.GC()
	took := time.Since(start)
	t.Logf("runtime.GC took %v while the guest spun", took)
	if took > time.Second {
		t.Errorf("runtime.GC took %v: it waited for the spinning guest", took)
	}
	if err := <-done; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("spin returned %v", err)
	}
}

// TestGuestNap checks a call that blocks in the scheduler (poll_oneoff)
// rather than spinning still completes under the guard.
func TestGuestNap(t *testing.T) {
	res := rewriteGuest(t, Options{})
	m := instantiate(t, newRuntime(t, wazero.NewRuntimeConfig(), deadlineYield), res.Module)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	out, err := m.ExportedFunction("nap").Call(ctx, api.EncodeI32(20))
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); api.DecodeI32(out[0]) != 20 || took < 20*time.Millisecond {
		t.Fatalf("nap(20) = %d after %v", api.DecodeI32(out[0]), took)
	}
}

// TestHandMadeLoops runs the hand-made loops and counts sched_yield calls,
// which pins down where the guard sits and that the counter is reset.
func TestHandMadeLoops(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		export   string
		n        int32
		interval int32
		want     int32 // the export's result
		passes   int32 // loop-header passes
	}{
		{"count", 0, 1, 0, 1},
		{"count", 10, 1, 10, 11},
		{"count", 10, 3, 10, 11},
		{"count", 1000, 7, 1000, 1001},
		{"count", 1000, 2000, 1000, 1001},
		{"paramLoop", 1, 1, 1, 1},
		{"paramLoop", 999, 10, 999, 999},
		{"paramLoop", 1000, 10, 1000, 1000},
		{"decoy", 5, 1, 5, 0}, // no loops despite 0x03 bytes in immediates
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/n=%d/interval=%d", tt.export, tt.n, tt.interval), func(t *testing.T) {
			res, err := Rewrite(loopModule(), Options{Interval: tt.interval})
			if err != nil {
				t.Fatal(err)
			}
			if res.Loops != 2 || res.Functions != 3 || res.YieldIndex != 1 || res.CounterGlobal != 0 {
				t.Fatalf("result %+v", *res)
			}
			var yields atomic.Int32
			r := newRuntime(t, wazero.NewRuntimeConfig(), func(_ context.Context, _ api.Module, stack []uint64) {
				yields.Add(1)
				stack[0] = 0
			})
			if _, err := r.NewHostModuleBuilder("env").NewFunctionBuilder().
				WithFunc(func() int32 { return 0 }).Export("other").Instantiate(ctx); err != nil {
				t.Fatal(err)
			}
			m := instantiateBare(t, r, res.Module)
			out, err := m.ExportedFunction(tt.export).Call(ctx, api.EncodeI32(tt.n))
			if err != nil {
				t.Fatal(err)
			}
			if got := api.DecodeI32(out[0]); got != tt.want {
				t.Errorf("%s(%d) = %d, want %d", tt.export, tt.n, got, tt.want)
			}
			if want := tt.passes / tt.interval; yields.Load() != want {
				t.Errorf("%d sched_yield calls, want %d", yields.Load(), want)
			}
		})
	}
}

func instantiateBare(t *testing.T, r wazero.Runtime, wasm []byte) api.Module {
	t.Helper()
	m, err := r.Instantiate(context.Background(), wasm)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestImportedGlobals checks the counter's index counts imported globals
// first, and that a global section is inserted in order when there is none.
func TestImportedGlobals(t *testing.T) {
	ctx := context.Background()
	mod := module(
		custom("first", []byte("kept")),
		yieldTypes,
		sec(secImport, vec(
			importGlobal("env", "a", valI32, 0),
			importFunc("wasi_snapshot_preview1", "sched_yield", 0),
			importGlobal("env", "b", valI64, 1),
		)),
		sec(secFunction, vec(u32(1))),
		custom("before-export", nil),
		sec(secExport, vec(exportFunc("count", 1))),
		sec(secCode, vec(countBody)),
		custom("name", []byte{}),
		custom(".debug_info", []byte{1, 2, 3}),
		custom("sourceMappingURL", str("x.map")),
	)
	res, err := Rewrite(mod, Options{Interval: 4})
	if err != nil {
		t.Fatal(err)
	}
	if res.CounterGlobal != 2 || res.YieldIndex != 0 {
		t.Fatalf("result %+v", *res)
	}
	secs, err := splitSections(res.Module)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, s := range secs {
		if s.id == secCustom {
			order = append(order, s.name)
		} else {
			order = append(order, fmt.Sprint(s.id))
		}
	}
	if got, want := strings.Join(order, " "), "first 1 2 3 before-export 6 7 10 name"; got != want {
		t.Fatalf("sections %q, want %q", got, want)
	}

	// Instantiate with the globals provided by another module, to show the
	// counter global is the new one (a wrong index would hit an immutable
	// or i64 global and fail validation, or count differently).
	env := module(
		sec(secGlobal, vec(cat([]byte{valI32, 0, opI32Const}, s32(5), []byte{opEnd}),
			cat([]byte{valI64, 1, 0x42, 0, opEnd}))),
		sec(secExport, vec(cat(str("a"), []byte{0x03, 0}), cat(str("b"), []byte{0x03, 1}))),
	)
	var yields atomic.Int32
	r := newRuntime(t, wazero.NewRuntimeConfig(), func(_ context.Context, _ api.Module, stack []uint64) {
		yields.Add(1)
		stack[0] = 0
	})
	if _, err := r.InstantiateWithConfig(ctx, env, wazero.NewModuleConfig().WithName("env")); err != nil {
		t.Fatal(err)
	}
	m := instantiateBare(t, r, res.Module)
	if _, err := m.ExportedFunction("count").Call(ctx, api.EncodeI32(99)); err != nil {
		t.Fatal(err)
	}
	if yields.Load() != 100/4 {
		t.Fatalf("%d yields, want 25", yields.Load())
	}
}

func TestNoYieldImport(t *testing.T) {
	tests := map[string][]byte{
		"no imports": module(yieldTypes, sec(secFunction, vec(u32(1))), sec(secCode, vec(countBody))),
		"other module": module(yieldTypes,
			sec(secImport, vec(importFunc("wasi_unstable", "sched_yield", 0))),
			sec(secFunction, vec(u32(1))), sec(secCode, vec(countBody))),
		"wrong type": module(yieldTypes,
			sec(secImport, vec(importFunc("wasi_snapshot_preview1", "sched_yield", 1))),
			sec(secFunction, vec(u32(1))), sec(secCode, vec(countBody))),
		"empty": module(),
	}
	for name, mod := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := Rewrite(mod, Options{}); !errors.Is(err, ErrNoYieldImport) {
				t.Fatalf("err = %v, want ErrNoYieldImport", err)
			}
		})
	}
}

// TestUnsupported checks that instructions the rewriter cannot decode are
// refused with the opcode, function index and module offset named.
func TestUnsupported(t *testing.T) {
	tests := []struct {
		name string
		code []byte // placed in function 2 (after two imports)
		op   string
	}{
		{"simd", []byte{0xfd, 0x0c}, "0xfd (SIMD)"},
		{"atomics", []byte{0xfe, 0x00}, "0xfe (threads)"},
		{"try", []byte{0x06, 0x40}, "0x6 (exception handling)"},
		{"gc", []byte{0xfb, 0x00}, "0xfb (GC)"},
		{"unknown fc", []byte{opPrefixFC, 0x7f}, "0xfc 127"},
		{"unknown", []byte{0xe0}, "0xe0 (unknown)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			marker := []byte{opI32Const, 0xde, 0xad, 0xbe, 0xef, 0x7b, opDrop} // locates the offset
			bad := body(nil, []byte{opLoop, blockTypeEmpty}, marker, tt.code, []byte{opEnd, opEnd})
			mod := module(yieldTypes,
				sec(secImport, vec(importFunc("env", "other", 0), importFunc("wasi_snapshot_preview1", "sched_yield", 0))),
				sec(secFunction, vec(u32(0))),
				sec(secCode, vec(bad)))
			_, err := Rewrite(mod, Options{})
			if !errors.Is(err, ErrUnsupported) {
				t.Fatalf("err = %v, want ErrUnsupported", err)
			}
			at := bytes.Index(mod, marker) + len(marker)
			for _, want := range []string{"function 2", fmt.Sprintf("offset %#x", at), tt.op} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
		})
	}
}

func TestMalformed(t *testing.T) {
	good := loopModule()
	tests := map[string][]byte{
		"nil":          nil,
		"bad magic":    []byte("\x00asn\x01\x00\x00\x00"),
		"version 2":    []byte("\x00asm\x02\x00\x00\x00"),
		"component":    []byte("\x00asm\x0d\x00\x01\x00"),
		"section past": cat(wasmHeader[:], []byte{secType, 0x10, 0}),
		"out of order": module(sec(secImport, vec()), yieldTypes),
		"twice":        module(yieldTypes, yieldTypes),
		"unknown id":   module(sec(42)),
		"leb too long": cat(wasmHeader[:], []byte{secType, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00}),
		"leb overflow": cat(wasmHeader[:], []byte{secType, 0x80, 0x80, 0x80, 0x80, 0x10}),
		"body count": module(yieldTypes, sec(secImport, vec(importFunc("wasi_snapshot_preview1", "sched_yield", 0))),
			sec(secFunction, vec(u32(1), u32(1))), sec(secCode, vec(countBody))),
		"no end": module(yieldTypes, sec(secImport, vec(importFunc("wasi_snapshot_preview1", "sched_yield", 0))),
			sec(secFunction, vec(u32(1))), sec(secCode, vec(body(nil, []byte{opLoop, blockTypeEmpty, opEnd})))),
		"after end": module(yieldTypes, sec(secImport, vec(importFunc("wasi_snapshot_preview1", "sched_yield", 0))),
			sec(secFunction, vec(u32(1))), sec(secCode, vec(body(nil, []byte{opEnd, 0x01})))),
		"block type": module(yieldTypes, sec(secImport, vec(importFunc("wasi_snapshot_preview1", "sched_yield", 0))),
			sec(secFunction, vec(u32(1))), sec(secCode, vec(body(nil, []byte{opLoop, 9, opEnd, opEnd})))),
	}
	for i := 8; i < len(good); i++ {
		tests[fmt.Sprintf("truncated at %d", i)] = good[:i]
	}
	for name, mod := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := Rewrite(mod, Options{}); err == nil {
				if strings.HasPrefix(name, "truncated") && atSectionEnd(good, len(mod)) {
					return // a prefix ending at a section boundary is a module
				}
				t.Fatal("no error")
			}
		})
	}
	if _, err := Rewrite(good, Options{Interval: -1}); err == nil {
		t.Error("negative interval accepted")
	}
}

// atSectionEnd reports whether n is the end of a section of module.
func atSectionEnd(module []byte, n int) bool {
	secs, _ := splitSections(module)
	end := len(wasmHeader)
	for _, s := range secs {
		end += len(s.raw)
		if end == n {
			return true
		}
	}
	return false
}

// TestGuestTruncated cuts the real guest at many points inside its
// sections: every cut must be an error, never a panic.
func TestGuestTruncated(t *testing.T) {
	wasm := guest(t)
	for n := 0; n < len(wasm); n += 1 + n/16 {
		if _, err := Rewrite(wasm[:n], Options{}); err == nil && !atSectionEnd(wasm, n) {
			t.Fatalf("truncated at %d: no error", n)
		}
	}
}

func TestHandMadeCompiles(t *testing.T) {
	res, err := Rewrite(loopModule(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wazero.NewRuntime(context.Background()).CompileModule(context.Background(), res.Module); err != nil {
		t.Fatal(err)
	}
}
