package registry_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/berthhq/berth/assembly"
	"github.com/berthhq/berth/config"
	"github.com/berthhq/berth/internal/testing/testbuild"
)

// BenchmarkPutSix uploads the repository's six Go samples one after
// another, as an operator deploying a system would, on a fresh host with
// the default configuration (tier-up: each module's optimizing compile runs
// in the background after its upload) and no compilation cache, and reports
// the first upload's time and the slowest later one's over it (issue 32:
// each no slower than the first, while earlier modules compile).
//
//	go test ./registry -run '^$' -bench BenchmarkPutSix -benchtime 1x -count 3
func BenchmarkPutSix(b *testing.B) {
	pkgs := []string{"samples/shipment-notifier", "samples/order-summary", "samples/order-saga",
		"samples/bench", "samples/class-tree", "samples/misbehaving"}
	wasms := make([][]byte, len(pkgs))
	for i, pkg := range pkgs {
		var err error
		if wasms[i], err = testbuild.Bytes(pkg); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	var first, worst time.Duration
	for b.Loop() {
		b.StopTimer()
		cfg := config.Default()
		cfg.Server.DataDir = b.TempDir()
		asm, err := assembly.Open(ctx, cfg, assembly.Options{WasmCacheDir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		var took []time.Duration
		for i, wasm := range wasms {
			start := time.Now()
			if _, _, err := asm.Modules.Put(ctx, fmt.Sprintf("m%d", i), wasm); err != nil {
				b.Fatalf("%s: %v", pkgs[i], err)
			}
			took = append(took, time.Since(start))
		}
		b.StopTimer()
		first, worst = took[0], max(took[1], took[2], took[3], took[4], took[5])
		b.Logf("each upload: %v", took)
		asm.Close(ctx)
		b.StartTimer()
	}
	b.ReportMetric(float64(first.Milliseconds()), "ms-first")
	b.ReportMetric(float64(worst.Milliseconds()), "ms-slowest-later")
	b.ReportMetric(float64(worst)/float64(first), "slowest/first")
}
