package sandbox

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/wasm/abi"
)

// noopEvent is an event for the bench sample's handler that does nothing:
// a realistic envelope (six strings, a ~300-byte payload), no work.
func noopEvent() *abi.Event {
	ev := orderPlaced()
	ev.Handler, ev.Type, ev.OwnerID = "noop", "Noop", "buyer-7"
	ev.InvocationKey = "OrderTotals.noop:Order/ord-000042@1:0"
	return ev
}

// errAttempt stands for the engine's attempt-timeout cause.
var errAttempt = errors.New("the attempt ran past its timeout")

// attemptTimeout is the deadline the benchmarks give each call.
const attemptTimeout = 10 * time.Second

// engineCall invokes ev as the engine does: under a context of its own with
// the attempt's deadline (the engine owns it; the sandbox observes it), the
// same timeout passed along.
func engineCall(m *Module, ev *abi.Event) Outcome {
	ctx, cancel := context.WithTimeoutCause(context.Background(), attemptTimeout, errAttempt)
	defer cancel()
	return m.Invoke(ctx, ev, attemptTimeout)
}

// BenchmarkNoop is the cost of the round trip itself: a handler that does
// nothing, on plain wazero (the baseline: the same module, nothing of the
// sandbox around it), and through the sandbox with deadlines on:
//
//   - sandbox: the caller's context carries the deadline, as the engine's
//     does (the sandbox observes it and starts no timer);
//   - sandbox-own-deadline: the sandbox owns a timeout (a direct call:
//     hostspec, tests), on the instance's timer;
//   - sandbox-engine-ctx: as the engine calls, with a new context and its
//     timer for each attempt (the engine's cost included).
func BenchmarkNoop(b *testing.B) {
	ctx := context.Background()
	b.Run("wazero", func(b *testing.B) {
		inst := newPlainGuest(b, wasmOf(b, "samples/bench")).instance(b)
		ev := noopEvent()
		b.ReportAllocs()
		defer reportCPU(b)()
		for b.Loop() {
			if err := inst.call(ctx, ev); err != nil {
				b.Fatal(err)
			}
		}
	})
	callerDeadline := func() func(*Module, *abi.Event) Outcome {
		attempt, cancel := context.WithTimeoutCause(ctx, time.Hour, errAttempt)
		b.Cleanup(cancel)
		return func(m *Module, ev *abi.Event) Outcome { return m.Invoke(attempt, ev, 0) }
	}()
	for _, c := range []struct {
		name   string
		growth float64 // Config.RecycleGrowth; 0: the default
		call   func(m *Module, ev *abi.Event) Outcome
	}{
		{"sandbox", 0, callerDeadline},
		// The same, recycling at the former default's growth: what sandbox.recycle-growth's 1.25
		// costs a call against 1.5.
		{"sandbox-growth-1.5", 1.5, callerDeadline},
		{"sandbox-own-deadline", 0, func(m *Module, ev *abi.Event) Outcome { return m.Invoke(ctx, ev, attemptTimeout) }},
		{"sandbox-engine-ctx", 0, engineCall},
	} {
		b.Run(c.name, func(b *testing.B) {
			s := newSandbox(b, Config{MaxInstances: 1, RecycleGrowth: c.growth})
			m := load(b, s, "samples/bench", ModuleConfig{})
			ev := noopEvent()
			b.ReportAllocs()
			defer reportCPU(b)()
			for b.Loop() {
				if o := c.call(m, ev); o.Kind != Success {
					b.Fatalf("%v: %s", o.Kind, o.Error())
				}
			}
			b.ReportMetric(float64(m.Stats().ClosedMemory), "recycled")
		})
	}
	// The ShipmentNotifier in Go and in Rust, called as the engine calls
	// (sandbox's setting) with no owner: its handler returns at once in both
	// (issue 21).
	for _, g := range notifierGuests {
		b.Run("sandbox-"+g.name, func(b *testing.B) {
			s := newSandbox(b, Config{MaxInstances: 1})
			m, err := s.Load(ctx, g.name, g.wasm(b), ModuleConfig{})
			if err != nil {
				b.Fatal(err)
			}
			ev := shippedNoOwner()
			b.ReportAllocs()
			defer reportCPU(b)()
			for b.Loop() {
				if o := callerDeadline(m, ev); o.Kind != Success {
					b.Fatalf("%v: %s", o.Kind, o.Error())
				}
			}
			b.ReportMetric(float64(m.Stats().ClosedMemory), "recycled")
		})
	}
}

// reportCPU starts measuring the process's CPU time; the func it returns
// reports it per iteration as cpu-ns/op, which a machine shared with other
// work disturbs less than the wall time of ns/op.
func reportCPU(b *testing.B) func() {
	start := cpuTime()
	return func() { b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op") }
}

// burst runs n calls split over g goroutines (call(i) for goroutine i) and
// returns the wall time and process CPU time they took.
func burst(g, n int, call func(i int) error) (wall, cpu time.Duration, err error) {
	errs := make([]error, g)
	var wg sync.WaitGroup
	start, startCPU := time.Now(), cpuTime()
	for i := range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range n / g {
				if errs[i] = call(i); errs[i] != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	return time.Since(start), cpuTime() - startCPU, errors.Join(errs...)
}

// BenchmarkScaling is how no-op calls on one module scale from one goroutine
// to two: plain wazero (an instance per goroutine: its best case) beside the
// sandbox (one module, a pool of 8). Each iteration runs a burst of calls in
// each of the four settings, so that the ratios it reports come from the
// same moments of a shared machine:
//
//   - wazero-2v1, sandbox-2v1: calls per second with two goroutines over one;
//   - sandbox/wazero: the sandbox's scaling as a fraction of wazero's;
//   - {wazero,sandbox}-cpu-2v1: CPU time per call with two goroutines over one
//     (what sharing a module costs beyond the work);
//   - {wazero,sandbox}-µs/call: wall time of one call on one goroutine.
func BenchmarkScaling(b *testing.B) {
	const n = 2000 // calls per burst
	wasm := wasmOf(b, "samples/bench")
	plain := newPlainGuest(b, wasm)
	insts := []*plainInstance{plain.instance(b), plain.instance(b)}
	m := load(b, newSandbox(b, Config{MaxInstances: 8}), "samples/bench", ModuleConfig{})
	evs := []*abi.Event{noopEvent(), noopEvent()}
	ctx := context.Background()
	// The deadline is the caller's, as the engine's is (its own cost, a
	// context per attempt, is left out: it is the same with or without a
	// sandbox).
	attempt, cancel := context.WithTimeoutCause(ctx, time.Hour, errAttempt)
	defer cancel()
	settings := []struct {
		name string
		call func(i int) error
	}{
		{"wazero", func(i int) error { return insts[i].call(ctx, evs[i]) }},
		{"sandbox", func(i int) error {
			if o := m.Invoke(attempt, evs[i], 0); o.Kind != Success {
				return errors.New(o.Error())
			}
			return nil
		}},
	}
	var wall, cpu [2][2]time.Duration // [setting][goroutines-1]
	for b.Loop() {
		for s, st := range settings {
			for g := 1; g <= 2; g++ {
				w, c, err := burst(g, n, st.call)
				if err != nil {
					b.Fatalf("%s, %d goroutines: %v", st.name, g, err)
				}
				wall[s][g-1] += w
				cpu[s][g-1] += c
			}
		}
	}
	calls := float64(b.N * n)
	for s, st := range settings {
		b.ReportMetric(float64(wall[s][0])/float64(wall[s][1]), st.name+"-2v1")
		b.ReportMetric(float64(cpu[s][1])/float64(cpu[s][0]), st.name+"-cpu-2v1")
		b.ReportMetric(float64(wall[s][0])/calls/1e3, st.name+"-µs/call")
	}
	scale := func(s int) float64 { return float64(wall[s][0]) / float64(wall[s][1]) }
	b.ReportMetric(scale(1)/scale(0), "sandbox/wazero")
}
