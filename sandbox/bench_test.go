package sandbox

import (
	"context"
	"log/slog"
	"path/filepath"
	goruntime "runtime"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/samples/bench/summary"
	"github.com/berthhq/berth/wasm/abi"
)

func orderPlaced() *abi.Event {
	return &abi.Event{
		Handler: "onOrderPlaced", InvocationKey: "OrderTotals.onOrderPlaced:ord-000042@1:0", Attempt: 1,
		Type: "OrderPlaced", AggregateType: "Order", AggregateID: "ord-000042", Version: 1, Payload: summary.Payload,
	}
}

// BenchmarkInvoke compares the same handler as a plain Go call, through the
// sandbox without a deadline, and through the sandbox with deadlines on
// (the loop guard, the default; close-on-done for comparison).
func BenchmarkInvoke(b *testing.B) {
	b.Run("native", func(b *testing.B) {
		for b.Loop() {
			if _, err := summary.Total(summary.Payload); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, c := range []struct {
		name    string
		mode    DeadlineMode
		timeout time.Duration
	}{
		{"wasm", DeadlinesNone, 0},
		{"wasm-deadline", DeadlinesLoopGuard, 10 * time.Second},
		{"wasm-deadline-closeondone", DeadlinesCloseOnDone, 10 * time.Second},
	} {
		b.Run(c.name, func(b *testing.B) {
			s := newSandbox(b, Config{Deadlines: c.mode, MaxInstances: 1})
			m := load(b, s, "samples/bench", ModuleConfig{})
			ev := orderPlaced()
			ctx := context.Background()
			for b.Loop() {
				if o := m.Invoke(ctx, ev, c.timeout); o.Kind != Success {
					b.Fatalf("%v: %s", o.Kind, o.Error())
				}
			}
		})
	}
}

// BenchmarkCancel reports how long past its deadline a call runs, per kind
// of wait, as ms-late: from the nominal deadline and (ms-overrun) from the
// moment the host saw it pass.
func BenchmarkCancel(b *testing.B) {
	addr := blackhole(b)
	s := newSandbox(b, Config{})
	m := load(b, s, "samples/misbehaving", ModuleConfig{
		AllowedHosts: []string{addr},
		Config:       map[string]string{"blackhole-url": "http://" + addr + "/"},
	})
	const timeout = 20 * time.Millisecond
	for _, c := range []struct{ name, handler string }{
		{"loop", "spinner"}, {"sleep", "sleeper"}, {"chan", "channelWaiter"}, {"hostcall", "hostCallBlocker"},
	} {
		b.Run(c.name, func(b *testing.B) {
			var late, overrun time.Duration
			for b.Loop() {
				b.StopTimer()
				// Warm an instance so that instantiation is not part of the call.
				m.Invoke(context.Background(), &abi.Event{Handler: "echo", InvocationKey: "warm"}, time.Second)
				b.StartTimer()
				o := m.Invoke(context.Background(), &abi.Event{Handler: c.handler, InvocationKey: "k"}, timeout)
				if o.Kind != Timeout {
					b.Fatalf("%v: %s", o.Kind, o.Error())
				}
				late += o.Duration - timeout
				overrun += o.Overrun
			}
			b.ReportMetric(float64(late)/float64(b.N)/1e6, "ms-late")
			b.ReportMetric(float64(overrun)/float64(b.N)/1e6, "ms-overrun")
		})
	}
}

// BenchmarkColdStart measures bytes in to first successful call, with an
// empty compilation cache (miss: on the interpreter, the default tier-up;
// miss-until-compiled: the same, until the background compile has switched
// the module to compiled code; miss-compiled: compiled before Load returns,
// as before tiering) and with a
// warm on-disk cache (hit). Closing the sandbox after the call cancels a
// miss's background compile.
func BenchmarkColdStart(b *testing.B) {
	run := func(b *testing.B, wasm []byte, ev *abi.Event, dir string, tiering TieringMode, wait bool) {
		s, err := New(Config{CacheDir: dir, Logger: discard(), Tiering: tiering})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close(context.Background())
		m, err := s.Load(context.Background(), "bench", wasm, ModuleConfig{})
		if err != nil {
			b.Fatal(err)
		}
		if o := m.Invoke(context.Background(), ev, time.Second); o.Kind != Success {
			b.Fatalf("%v: %s", o.Kind, o.Error())
		}
		if wait && m.tierDone != nil {
			<-m.tierDone // until the module runs compiled, and the cache is filled
		}
	}
	misses := []struct {
		name    string
		tiering TieringMode
		wait    bool
	}{{"miss", TierUp, false}, {"miss-until-compiled", TierUp, true}, {"miss-compiled", CompiledOnly, false}}
	guest := func(prefix string, wasm []byte, ev func() *abi.Event) {
		for _, c := range misses {
			b.Run(prefix+c.name, func(b *testing.B) {
				for b.Loop() {
					b.StopTimer()
					dir := b.TempDir()
					b.StartTimer()
					run(b, wasm, ev(), dir, c.tiering, c.wait)
				}
				b.ReportMetric(float64(len(wasm)), "module-bytes")
			})
		}
		b.Run(prefix+"hit", func(b *testing.B) {
			dir := filepath.Join(b.TempDir(), "cache")
			run(b, wasm, ev(), dir, TierUp, true) // fill the cache
			for b.Loop() {
				run(b, wasm, ev(), dir, TierUp, false)
			}
			b.ReportMetric(float64(len(wasm)), "module-bytes")
		})
	}
	guest("", wasmOf(b, "samples/bench"), orderPlaced)
	// The ShipmentNotifier in Go and in Rust, its no-owner call (issue 21).
	for _, g := range notifierGuests {
		guest(g.name+"/", g.wasm(b), shippedNoOwner)
	}
}

// BenchmarkInstanceMemory reports the memory one warm instance of the
// benchmark sample holds: its linear memory, and the Go heap it adds.
func BenchmarkInstanceMemory(b *testing.B) {
	s := newSandbox(b, Config{})
	m := load(b, s, "samples/bench", ModuleConfig{})
	ctx := context.Background()
	var linear, heap float64
	for b.Loop() {
		var before, after goruntime.MemStats
		goruntime.GC()
		goruntime.ReadMemStats(&before)
		inst, err := m.newInstance(ctx, time.Time{})
		if err != nil {
			b.Fatal(err)
		}
		cctx := inst.begin(ctx, orderPlaced(), Ports{}, time.Time{})
		if _, err := inst.call(cctx, abi.AppendEvent(nil, orderPlaced())); err != nil {
			b.Fatal(err)
		}
		inst.finish()
		inst.end()
		goruntime.GC()
		goruntime.ReadMemStats(&after)
		linear += float64(inst.memoryBytes())
		heap += float64(after.HeapAlloc) - float64(before.HeapAlloc)
		inst.close()
	}
	b.ReportMetric(linear/float64(b.N)/(1<<20), "MiB-linear/instance")
	b.ReportMetric(heap/float64(b.N)/(1<<20), "MiB-heap/instance")
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// BenchmarkMemoryHog runs the memoryHog handler (it allocates until
// memory.grow fails at the 64 MiB limit) b.N times, four calls at a time
// on a pool of eight, after warming the pool to eight idle instances. It
// reports the Go heap: the largest HeapAlloc seen between calls without
// forcing a collection (garbage included, what go_memstats_heap_alloc_bytes
// shows), and HeapAlloc and HeapInuse after a forced collection at the end
// (what stays reachable).
func BenchmarkMemoryHog(b *testing.B) {
	s := newSandbox(b, Config{MaxInstances: 8})
	m := load(b, s, "samples/misbehaving", ModuleConfig{})
	ctx := context.Background()
	var warm []*instance
	for range 8 {
		inst, err := m.pool.acquire(ctx, time.Time{})
		if err != nil {
			b.Fatal(err)
		}
		warm = append(warm, inst)
	}
	for _, inst := range warm {
		m.pool.put(inst, false)
	}
	warm = nil
	var mu sync.Mutex
	var peak uint64
	calls := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var ms goruntime.MemStats
			for range calls {
				if o := m.Invoke(ctx, &abi.Event{Handler: "memoryHog", InvocationKey: "hog"}, 30*time.Second); o.Kind != MemoryExceeded {
					b.Errorf("%v: %s", o.Kind, o.Error())
				}
				goruntime.ReadMemStats(&ms)
				mu.Lock()
				peak = max(peak, ms.HeapAlloc)
				mu.Unlock()
			}
		}()
	}
	for b.Loop() {
		calls <- struct{}{}
	}
	close(calls)
	wg.Wait()
	var ms goruntime.MemStats
	goruntime.GC()
	goruntime.ReadMemStats(&ms)
	const mib = 1 << 20
	b.ReportMetric(float64(peak)/mib, "MiB-heap-peak")
	b.ReportMetric(float64(ms.HeapAlloc)/mib, "MiB-heap-after-gc")
	b.ReportMetric(float64(ms.HeapInuse)/mib, "MiB-inuse-after-gc")
	b.ReportMetric(float64(m.Stats().Idle), "idle-instances")
}
