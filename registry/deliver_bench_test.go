package registry_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berthhq/berth/config"
	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/internal/hostkit"
	"github.com/berthhq/berth/internal/natstest"
	"github.com/berthhq/berth/internal/testbuild"
	"github.com/berthhq/berth/samples/bench/summary"
	"github.com/berthhq/berth/sandbox"
	"github.com/berthhq/berth/wasm/abi"
)

// benchGuest is one kind of processor running samples/bench's handler.
type benchGuest struct {
	kind string // the sub-benchmark's name
	pkg  string // the guest's package, built with testbuild
	sub  string // its subscription
}

var benchGuests = []benchGuest{
	{"reactor", "registry/testdata/benchreactor", "OrderTotalsReactor.onOrderPlaced"},
	{"projection", "samples/bench", "OrderTotals.onOrderPlaced"},
}

// benchWasm builds each guest once per test binary.
var benchWasm = sync.OnceValues(func() (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, g := range benchGuests {
		b, err := testbuild.Bytes(g.pkg)
		if err != nil {
			return nil, err
		}
		out[g.kind] = b
	}
	return out, nil
})

// benchAggregates is how many aggregates the benchmark's events are spread
// over: many more than the 64 the default engine handles at once
// (16 partitions x 4), so that every slot has work.
const benchAggregates = 1024

// BenchmarkDeliverWasm measures samples/bench's handler (decode a ~300-byte
// order and total it) delivered end to end by a whole host with the default
// configuration (internal/hostkit: Badger log and ledger, the sandbox, the
// engine's 16 partitions x 4), as a reactor and as a projection, beside the
// pool ceiling of the same guest in the same run: the module called
// directly on the sandbox by as many goroutines as its pool has instances.
// events/s is the host's, ceiling-events/s the pool's, ratio the first over
// the second.
//
//	go test ./registry -run '^$' -bench BenchmarkDeliverWasm -benchtime 20000x -count 5
func BenchmarkDeliverWasm(b *testing.B) {
	wasm, err := benchWasm()
	if err != nil {
		b.Fatal(err)
	}
	cache := b.TempDir() // shared, so that each host loads the guest from the compilation cache
	for _, g := range benchGuests {
		b.Run(g.kind, func(b *testing.B) { benchDeliverWasm(b, g, wasm[g.kind], cache, nil) })
	}
}

// BenchmarkDeliverBackends is BenchmarkDeliverWasm's reactor on each event
// log backend in one run: Badger, and JetStream on one in-process NATS node
// (R1) and on a three-node cluster (R3). The ledger is Badger in all three.
//
//	go test ./registry -run '^$' -bench BenchmarkDeliverBackends -benchtime 5000x -count 3
func BenchmarkDeliverBackends(b *testing.B) {
	wasm, err := benchWasm()
	if err != nil {
		b.Fatal(err)
	}
	cache := b.TempDir()
	g := benchGuests[0]
	jetStream := func(urls string, replicas int) func(*config.Config) {
		return func(cfg *config.Config) {
			cfg.Store.Backend = config.BackendJetStream
			cfg.Store.JetStream.URLs = strings.Split(urls, ",")
			cfg.Store.JetStream.Replicas = replicas
		}
	}
	b.Run("badger", func(b *testing.B) { benchDeliverWasm(b, g, wasm[g.kind], cache, nil) })
	b.Run("jetstream-R1", func(b *testing.B) {
		benchDeliverWasm(b, g, wasm[g.kind], cache, jetStream(natstest.RunServer(b).URL(), 1))
	})
	b.Run("jetstream-R3", func(b *testing.B) {
		benchDeliverWasm(b, g, wasm[g.kind], cache, jetStream(natstest.RunCluster(b, 3).URLs(), 3))
	})
}

func benchDeliverWasm(b *testing.B, g benchGuest, wasm []byte, cache string, setup func(*config.Config)) {
	ctx := context.Background()
	cfg := config.Default()
	cfg.Server.DataDir = b.TempDir()
	if setup != nil {
		setup(cfg)
	}
	// Delivery and ceiling both on compiled code: with tier-up (the default) a module missing from
	// the cache would start on the interpreter for its first second or so, whose cost is
	// BenchmarkColdStart's (sandbox), not this comparison's.
	cfg.SandboxConfig.TierUp = false
	kit, err := hostkit.Open(ctx, cfg, hostkit.Options{WasmCacheDir: cache})
	if err != nil {
		b.Fatal(err)
	}
	defer kit.Close(ctx)
	if _, _, err := kit.Modules.Put(ctx, "bench", wasm); err != nil {
		b.Fatal(err)
	}
	// Paused while the events are appended, so that what is timed is the
	// delivery alone.
	if err := kit.Engine.Pause(ctx, g.sub); err != nil {
		b.Fatal(err)
	}
	for i := range b.N {
		if _, err := kit.Events.Append(ctx, eventlog.AppendRequest{AggregateType: "Order",
			AggregateID: fmt.Sprint("ord-", i%benchAggregates), ExpectedVersion: eventlog.AnyVersion,
			Events: []eventlog.Event{{Type: "OrderPlaced", Payload: summary.Payload}}}); err != nil {
			b.Fatal(err)
		}
	}
	// The ceiling is measured half before and half after the delivery, so
	// that a change in the shared machine's load during the run weighs on
	// both figures alike.
	before := poolCeiling(b, kit, cfg, wasm, b.N/2)

	b.ResetTimer()
	start := time.Now()
	if err := kit.Engine.Unpause(ctx, g.sub); err != nil {
		b.Fatal(err)
	}
	for {
		st, err := kit.Engine.Status(ctx, g.sub)
		if err != nil {
			b.Fatal(err)
		}
		if st.Lag == 0 {
			for state, n := range st.Parked {
				if n > 0 {
					b.Fatalf("%d aggregates %s: the guest failed", n, state)
				}
			}
			break
		}
		time.Sleep(time.Millisecond)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	after := poolCeiling(b, kit, cfg, wasm, b.N-b.N/2)
	ceiling := float64(b.N) / (before + after).Seconds()
	rate := float64(b.N) / elapsed.Seconds()
	b.ReportMetric(rate, "events/s")
	b.ReportMetric(ceiling, "ceiling-events/s")
	b.ReportMetric(rate/ceiling, "ratio")
}

// poolCeiling returns how long n calls of the guest's handler take when
// made directly on a module of its own in kit's sandbox, by as many
// goroutines as the pool has instances: what the host's delivery could
// reach if the engine and the stores cost nothing.
func poolCeiling(b *testing.B, kit *hostkit.Host, cfg *config.Config, wasm []byte, n int) time.Duration {
	b.Helper()
	ctx := context.Background()
	mod, err := kit.Sandbox.Load(ctx, "ceiling", wasm, cfg.Module("ceiling"))
	if err != nil {
		b.Fatal(err)
	}
	defer mod.Close(ctx)
	handler := mod.Description().Handlers[0].Name
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for range cfg.Sandbox().MaxInstances {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				ev := abi.Event{Handler: handler, InvocationKey: fmt.Sprint("k", i), Attempt: 1, Type: "OrderPlaced",
					AggregateType: "Order", AggregateID: fmt.Sprint("ord-", i%benchAggregates), Version: 1,
					Position: uint64(i), TimeUnixNano: time.Now().UnixNano(), Payload: summary.Payload}
				if o := mod.Invoke(ctx, &ev, 10*time.Second); o.Kind != sandbox.Success {
					failed.Store(fmt.Sprintf("%s: %s", o.Kind, o.Message))
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if f := failed.Load(); f != nil {
		b.Fatalf("a direct call failed: %v", f)
	}
	return elapsed
}
