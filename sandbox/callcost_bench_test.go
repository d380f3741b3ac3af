package sandbox

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/affinity"
	"github.com/berthhq/berth/internal/testing/wasmbench"
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
		inst := wasmbench.NewPlainGuest(b, wasmOf(b, "samples/bench"), cacheDir).Instance(b)
		ev := noopEvent()
		b.ReportAllocs()
		defer wasmbench.ReportCPU(b)()
		for b.Loop() {
			if err := inst.Call(ctx, ev); err != nil {
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
			defer wasmbench.ReportCPU(b)()
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
			defer wasmbench.ReportCPU(b)()
			for b.Loop() {
				if o := callerDeadline(m, ev); o.Kind != Success {
					b.Fatalf("%v: %s", o.Kind, o.Error())
				}
			}
			b.ReportMetric(float64(m.Stats().ClosedMemory), "recycled")
		})
	}
}

// BenchmarkScaling is how no-op calls on one module scale from one goroutine
// to two: plain wazero (an instance per goroutine: its best case) beside the
// sandbox (one module, a pool of 8), in bursts alternating between them
// (wasmbench.Scaling: sandbox/wazero is the sandbox's scaling as a fraction
// of wazero's).
func BenchmarkScaling(b *testing.B) {
	const n = 2000 // calls per burst
	wasm := wasmOf(b, "samples/bench")
	plain := wasmbench.NewPlainGuest(b, wasm, cacheDir)
	insts := []*wasmbench.PlainInstance{plain.Instance(b), plain.Instance(b)}
	m := load(b, newSandbox(b, Config{MaxInstances: 8}), "samples/bench", ModuleConfig{})
	evs := []*abi.Event{noopEvent(), noopEvent()}
	ctx := context.Background()
	// The deadline is the caller's, as the engine's is (its own cost, a
	// context per attempt, is left out: it is the same with or without a
	// sandbox).
	attempt, cancel := context.WithTimeoutCause(ctx, time.Hour, errAttempt)
	defer cancel()
	settings := []wasmbench.Setting{
		{Name: "wazero", Call: func(i int) error { return insts[i].Call(ctx, evs[i]) }},
		{Name: "sandbox", Call: func(i int) error {
			if o := m.Invoke(attempt, evs[i], 0); o.Kind != Success {
				return errors.New(o.Error())
			}
			return nil
		}},
	}
	wasmbench.Scaling(b, n, settings...)
}

// BenchmarkPoolTakeReturn is the pool alone on the call path: an idle
// instance taken and put back, with no call, from one goroutine or from two
// at once (-cpu 1,2); ns/op is wall time over every goroutine's calls.
// shared: calls with no affinity key, through the pool's one lock, whose
// cache line moves between cores on every take and return; keyed: each
// goroutine under an affinity key of its own, as the engine's partitions
// call (an instance waits in the key's slot between calls).
//
//	go test ./sandbox -run '^$' -bench BenchmarkPoolTakeReturn -cpu 1,2 -count 5
func BenchmarkPoolTakeReturn(b *testing.B) {
	m := load(b, newSandbox(b, Config{MaxInstances: 8}), "samples/bench", ModuleConfig{})
	for _, keyed := range []bool{false, true} {
		b.Run(map[bool]string{false: "shared", true: "keyed"}[keyed], func(b *testing.B) {
			var next atomic.Int32
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				if keyed {
					ctx = affinity.With(ctx, int(next.Add(1)))
				}
				for pb.Next() {
					inst, err := m.pool.acquire(ctx, time.Time{})
					if err != nil {
						b.Error(err)
						return
					}
					m.pool.put(inst, false)
				}
			})
		})
	}
}
