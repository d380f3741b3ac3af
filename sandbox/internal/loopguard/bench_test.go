package loopguard

import (
	"context"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// BenchmarkRewrite rewrites the ~2 MB Go guest.
func BenchmarkRewrite(b *testing.B) {
	wasm := guest(b)
	b.SetBytes(int64(len(wasm)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Rewrite(wasm, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGuardCost calls the guest's sum export three ways: the plain
// module (no way to stop a spin), the rewritten module with the deadline
// checking sched_yield, and the plain module under wazero's
// WithCloseOnContextDone. Every call carries a deadline, as in Berth.
func BenchmarkGuardCost(b *testing.B) {
	const n = 10_000
	plain := guest(b)
	guarded := rewriteGuest(b, Options{}).Module
	cases := []struct {
		name  string
		cfg   wazero.RuntimeConfig
		yield api.GoModuleFunc
		wasm  []byte
	}{
		{"plain", wazero.NewRuntimeConfig(), nil, plain},
		{"rewritten", wazero.NewRuntimeConfig(), deadlineYield, guarded},
		{"closeOnDone", wazero.NewRuntimeConfig().WithCloseOnContextDone(true), nil, plain},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			m := instantiate(b, newRuntime(b, c.cfg, c.yield), c.wasm)
			sum := m.ExportedFunction("sum")
			ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
			defer cancel()
			for b.Loop() {
				out, err := sum.Call(ctx, n)
				if err != nil || int64(out[0]) != sumWant(n) {
					b.Fatal(out, err)
				}
			}
		})
	}
}
