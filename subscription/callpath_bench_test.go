package subscription_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/config"
	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/internal/affinity"
	"github.com/berthhq/berth/internal/testing/testbuild"
	"github.com/berthhq/berth/internal/testing/wasmbench"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/registry"
	"github.com/berthhq/berth/retry"
	"github.com/berthhq/berth/samples/bench/summary"
	"github.com/berthhq/berth/sandbox"
	"github.com/berthhq/berth/subscription"
	"github.com/berthhq/berth/wasm/abi"
)

// benchWasm is samples/bench's module (a projection whose noop handler does
// nothing), built once per test binary.
var benchWasm = sync.OnceValues(func() ([]byte, error) { return testbuild.Bytes("samples/bench") })

// noopSub is the subscription of samples/bench's no-op handler.
const noopSub = "OrderTotals.noop"

// callPath is the engine's call path to samples/bench's no-op handler on a
// host of its own: the engine's attempt (run.invoke: the attempt's context
// with the policy's 30 s timeout), the registry's invoker (the envelope,
// registry.Call, failureOf) and the sandbox beneath (a pool of 8), over a
// registry without a query store, so that the handler's invoker is the
// reactor's plain one.
type callPath struct {
	attempt func(context.Context, subscription.Delivery) *retry.Failure
	box     *sandbox.Sandbox
}

// newCallPath opens the host's engine, registry and sandbox (deadlines by
// mode, the compilation cache in cache) over stores in a directory of tb's
// and deploys samples/bench on it. Nothing is started: the benchmark makes
// the attempts.
func newCallPath(tb testing.TB, wasm []byte, cache string, mode sandbox.DeadlineMode) *callPath {
	tb.Helper()
	ctx := context.Background()
	cfg := config.Default()
	cfg.Server.DataDir = tb.TempDir()
	cfg.SandboxConfig.TierUp = false // compiled before Put returns: the interpreter is not what is measured
	log, err := eventlog.Open(cfg.Server.DataDir+"/log", eventlog.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { log.Close(ctx) })
	store, err := ledger.Open(cfg.Server.DataDir+"/ledger", ledger.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { store.Close(ctx) })
	sb := cfg.Sandbox()
	sb.CacheDir, sb.Deadlines, sb.Logger = cache, mode, slog.New(slog.DiscardHandler)
	box, err := sandbox.New(sb)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { box.Close(ctx) })
	opts, err := cfg.EngineOptions()
	if err != nil {
		tb.Fatal(err)
	}
	opts.Logger = slog.New(slog.DiscardHandler)
	eng, err := subscription.Open(log, store, opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { eng.Close(ctx) })
	reg, err := registry.Open(ctx, registry.Options{Dir: cfg.ModulesDir(), Sandbox: box, Engine: eng,
		Settings: func() registry.Settings { return cfg }, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	if _, _, err := reg.Put(ctx, "bench", wasm); err != nil {
		tb.Fatal(err)
	}
	attempt := eng.Attempter(noopSub)
	if attempt == nil {
		tb.Fatalf("no subscription %s", noopSub)
	}
	return &callPath{attempt: attempt, box: box}
}

// noopDelivery is a delivery of samples/bench's order to the no-op handler,
// as the engine makes it (the subscription's fields are the Attempter's).
func noopDelivery() subscription.Delivery {
	c := eventlog.Commit{Position: 42, AggregateType: "Order", AggregateID: "ord-000042", Version: 1, OwnerID: "buyer-7",
		Time: time.Now(), Events: []eventlog.Event{{Type: "Noop", Payload: summary.Payload}}}
	return subscription.Delivery{InvocationKey: subscription.InvocationKey(noopSub, c, 0), Attempt: 1, Commit: c}
}

// plainEvent is d's envelope, as the registry encodes it for the sandbox
// (with a deadline 30 s ahead).
func plainEvent(d subscription.Delivery) *abi.Event {
	ev := d.Commit.Events[d.Index]
	return &abi.Event{Handler: "noop", InvocationKey: d.InvocationKey, Attempt: uint32(d.Attempt), Type: ev.Type,
		AggregateType: d.Commit.AggregateType, AggregateID: d.Commit.AggregateID, Version: d.Commit.Version,
		Index: uint32(d.Index), OwnerID: d.Commit.OwnerID, Position: d.Commit.Position,
		TimeUnixNano: d.Commit.Time.UnixNano(), Payload: ev.Payload, DeadlineUnixNano: time.Now().Add(30 * time.Second).UnixNano()}
}

// errFailed is a setting's call that did not succeed.
var errFailed = errors.New("the no-op call failed")

// BenchmarkEngineCall is one no-op invocation exactly as the engine makes
// it (issue 24), beside plain wazero on the same guest, in bursts of calls
// alternating between the settings within each iteration so that every
// ratio comes from the same moments of a shared machine:
//
//   - wazero: the same module on plain wazero, an instance per goroutine
//     (wasmbench.PlainGuest: the baseline);
//   - engine-nodeadline: the engine's call path on a sandbox with
//     sandbox.DeadlinesNone (no loop guard; the attempt's context is the
//     same);
//   - engine: the engine's call path as the host runs it (the loop guard).
//
// Besides wasmbench.Scaling's metrics (µs and CPU per call on one
// goroutine, two goroutines over one on one module with a pool of 8, and
// each scaling as a fraction of wazero's), it reports deadline-cost and
// deadline-cost-cpu: engine over engine-nodeadline, wall and CPU, on one
// goroutine.
//
//	go test ./subscription -run '^$' -bench BenchmarkEngineCall -benchtime 20x -count 6
func BenchmarkEngineCall(b *testing.B) {
	const n = 2000 // calls per burst
	wasm, err := benchWasm()
	if err != nil {
		b.Fatal(err)
	}
	cache := b.TempDir()
	plain := wasmbench.NewPlainGuest(b, wasm, cache)
	insts := []*wasmbench.PlainInstance{plain.Instance(b), plain.Instance(b)}
	on := newCallPath(b, wasm, cache, sandbox.DeadlinesLoopGuard)
	off := newCallPath(b, wasm, cache, sandbox.DeadlinesNone)
	ds := []subscription.Delivery{noopDelivery(), noopDelivery()}
	evs := []*abi.Event{plainEvent(ds[0]), plainEvent(ds[1])}
	// The partitions' contexts, which the engine's attempts are made under:
	// each goroutine is one partition (its affinity key).
	part, cancel := context.WithCancel(context.Background())
	defer cancel()
	parts := []context.Context{affinity.With(part, 0), affinity.With(part, 1)}
	engine := func(p *callPath) func(i int) error {
		return func(i int) error {
			if f := p.attempt(parts[i], ds[i]); f != nil {
				return errors.Join(errFailed, errors.New(f.Message))
			}
			return nil
		}
	}
	tot := wasmbench.Scaling(b, n,
		wasmbench.Setting{Name: "wazero", Call: func(i int) error { return insts[i].Call(part, evs[i]) }},
		wasmbench.Setting{Name: "engine-nodeadline", Call: engine(off)},
		wasmbench.Setting{Name: "engine", Call: engine(on)},
	)
	b.ReportMetric(float64(tot[2].Wall[0])/float64(tot[1].Wall[0]), "deadline-cost")
	b.ReportMetric(float64(tot[2].CPU[0])/float64(tot[1].CPU[0]), "deadline-cost-cpu")
	st := on.box.Modules()[0].Stats()
	b.ReportMetric(float64(st.Created)/float64(b.N), "engine-instances/op")
	b.ReportMetric(float64(st.ClosedMemory)/float64(b.N), "engine-recycled/op")
}

// TestEngineCallAllocations: a successful no-op attempt on the engine's
// call path (attempt context, registry invoker, sandbox) allocates one
// object, the attempt's context (which outlives the attempt in whatever
// kept it, so it is never reused); the envelope, the call's state and its
// context are the instance's. Garbage made per call is collected on every
// core.
func TestEngineCallAllocations(t *testing.T) {
	wasm, err := benchWasm()
	if err != nil {
		t.Fatal(err)
	}
	p := newCallPath(t, wasm, t.TempDir(), sandbox.DeadlinesLoopGuard)
	d := noopDelivery()
	ctx := context.Background()
	allocs := testing.AllocsPerRun(1000, func() {
		if f := p.attempt(ctx, d); f != nil {
			t.Fatal(f.Message)
		}
	})
	if allocs > 1 {
		t.Errorf("%.1f allocations per attempt, want 1 (the attempt's context)", allocs)
	}
}
