package registry_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/berthhq/berth/assembly"
	"github.com/berthhq/berth/config"
	"github.com/berthhq/berth/internal/testing/testbuild"
	"github.com/berthhq/berth/internal/testing/wasmbench"
)

// BenchmarkPutSix uploads the repository's six Go samples one after
// another, as an operator deploying a system would, on a fresh host with
// the default configuration (tier-up: each module's optimizing compile runs
// in the background after its upload) and no compilation cache, and reports
// the first upload's time and the slowest later one's over it (issue 32:
// each no slower than the first, while earlier modules compile). The same
// of the process's CPU time over each upload (cpu-slowest/first; any
// background compile or collection that runs meanwhile counts in it): on
// a shared machine the wall-clock ratio is the load's as much as the
// uploads' own.
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
	var first, worst, firstCPU, worstCPU time.Duration
	for b.Loop() {
		b.StopTimer()
		cfg := config.Default()
		cfg.Server.DataDir = b.TempDir()
		asm, err := assembly.Open(ctx, cfg, assembly.Options{WasmCacheDir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		var took, cpu []time.Duration
		for i, wasm := range wasms {
			start, startCPU := time.Now(), wasmbench.CPUTime()
			if _, _, err := asm.Modules.Put(ctx, fmt.Sprintf("m%d", i), wasm); err != nil {
				b.Fatalf("%s: %v", pkgs[i], err)
			}
			took = append(took, time.Since(start))
			cpu = append(cpu, wasmbench.CPUTime()-startCPU)
		}
		b.StopTimer()
		first, worst = took[0], slices.Max(took[1:])
		firstCPU, worstCPU = cpu[0], slices.Max(cpu[1:])
		b.Logf("each upload: %v; CPU: %v", took, cpu)
		asm.Close(ctx)
		b.StartTimer()
	}
	b.ReportMetric(float64(first.Milliseconds()), "ms-first")
	b.ReportMetric(float64(worst.Milliseconds()), "ms-slowest-later")
	b.ReportMetric(float64(worst)/float64(first), "slowest/first")
	b.ReportMetric(float64(worstCPU)/float64(firstCPU), "cpu-slowest/first")
}
