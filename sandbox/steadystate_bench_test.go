package sandbox

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/wasmbench"
	"github.com/berthhq/berth/wasm/abi"
)

// steadyStateCalls is how many calls BenchmarkSteadyStateMemory makes on
// its one instance per iteration: the 16k calls over which a Go guest's
// linear memory was seen to creep from 3 to 7.5 MiB.
const steadyStateCalls = 16384

// BenchmarkSteadyStateMemory reports what one busy instance of the
// benchmark sample holds after steadyStateCalls calls, one after another,
// through the pool (of one, so every call reuses or replaces the same
// instance): the linear memory of the instance in the pool at the end, and
// the Go heap that instance holds (the heap after a collection with it
// pooled, less the heap once it is closed). wazero keeps linear memory in
// the Go heap, so MiB-heap is the instance's resident size, its linear
// memory included (with the slack of the buffer's growth). It also reports
// how many instances the pool replaced for their growth, and the peaks
// between calls: the largest linear memory the pooled instance held after
// any call, and the heap it held then (measured when the peak is first
// reached, against the same heap without it at the end). Each sub-benchmark
// is one Config.RecycleGrowth; cpu-µs/call is the process's CPU time per
// call over the whole run, replacements included: what a lower growth costs
// in throughput.
func BenchmarkSteadyStateMemory(b *testing.B) {
	for _, growth := range []float64{1.25, 1.5} {
		b.Run(fmt.Sprintf("growth=%v", growth), func(b *testing.B) {
			steadyStateMemory(b, growth, wasmOf(b, "samples/bench"), orderPlaced())
		})
	}
	// The ShipmentNotifier in Go and in Rust, at the default growth, with
	// no owner (issue 21).
	for _, g := range notifierGuests {
		b.Run(g.name, func(b *testing.B) { steadyStateMemory(b, 0, g.wasm(b), shippedNoOwner()) })
	}
}

// steadyStateMemory is BenchmarkSteadyStateMemory for one RecycleGrowth
// (0: the default), module and event.
func steadyStateMemory(b *testing.B, growth float64, wasm []byte, ev *abi.Event) {
	var linear, heap, recycled, peakLinear, peakHeap float64
	var cpu time.Duration
	for b.Loop() {
		s := newSandbox(b, Config{MaxInstances: 1, RecycleGrowth: growth})
		ctx := context.Background()
		m, err := s.Load(ctx, "steady", wasm, ModuleConfig{})
		if err != nil {
			b.Fatal(err)
		}
		var maxLinear, maxWith uint64
		start := wasmbench.CPUTime()
		for range steadyStateCalls {
			if o := m.Invoke(ctx, ev, 10*time.Second); o.Kind != Success {
				b.Fatalf("%v: %s", o.Kind, o.Error())
			}
			if l := m.Stats().MaxIdleMemoryBytes; l > maxLinear {
				maxLinear, maxWith = l, heapAfterGC()
			}
		}
		cpu += wasmbench.CPUTime() - start
		st := m.Stats()
		if st.Idle != 1 {
			b.Fatalf("idle instances = %d after the calls, want 1", st.Idle)
		}
		with := heapAfterGC()
		m.pool.drop(func(*instance) bool { return true }, new(int64))
		without := heapAfterGC()
		linear += float64(st.MaxIdleMemoryBytes)
		heap += float64(with) - float64(without)
		recycled += float64(st.ClosedMemory)
		peakLinear += float64(maxLinear)
		peakHeap += float64(maxWith) - float64(without)
		if err := s.Close(ctx); err != nil {
			b.Fatal(err)
		}
	}
	n := float64(b.N)
	b.ReportMetric(linear/n/(1<<20), "MiB-linear")
	b.ReportMetric(heap/n/(1<<20), "MiB-heap")
	b.ReportMetric(recycled/n, "recycled")
	b.ReportMetric(peakLinear/n/(1<<20), "MiB-linear-peak")
	b.ReportMetric(peakHeap/n/(1<<20), "MiB-heap-peak")
	b.ReportMetric(float64(cpu.Microseconds())/n/steadyStateCalls, "cpu-µs/call")
}
