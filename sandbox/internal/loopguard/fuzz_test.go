package loopguard

import (
	"errors"
	"testing"
)

// FuzzRewrite feeds arbitrary bytes to Rewrite: it must never panic, and
// whatever it accepts it must also accept again after rewriting (its output
// is well formed). The seeds, run by plain go test, are the real guest's
// first bytes and small hand-made modules.
func FuzzRewrite(f *testing.F) {
	wasm := guest(f)
	for _, n := range []int{8, 64, 512, 4096} {
		f.Add(wasm[:n])
	}
	f.Add(loopModule())
	f.Add(loopModule(custom(".debug_line", []byte{1})))
	f.Add(module(yieldTypes, sec(secImport, vec(importFunc("wasi_snapshot_preview1", "sched_yield", 0)))))
	f.Add(module(yieldTypes, sec(secImport, vec(importFunc("wasi_snapshot_preview1", "sched_yield", 0))),
		sec(secFunction, vec(u32(1))), sec(secCode, vec(paramLoopBody))))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		res, err := Rewrite(in, Options{Interval: 3})
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnsupported) && !errors.Is(err, ErrNoYieldImport) {
				t.Fatalf("error wraps no sentinel: %v", err)
			}
			return
		}
		again, err := Rewrite(res.Module, Options{Interval: 3})
		if err != nil {
			t.Fatalf("output does not rewrite again: %v", err)
		}
		if again.Loops != res.Loops || again.Functions != res.Functions || again.CounterGlobal != res.CounterGlobal+1 {
			t.Fatalf("second rewrite %+v after %+v", *again, *res)
		}
	})
}
