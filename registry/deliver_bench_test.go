package registry_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berthhq/berth/assembly"
	"github.com/berthhq/berth/config"
	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/internal/testing/testbuild"
	"github.com/berthhq/berth/registry"
	"github.com/berthhq/berth/samples/bench/summary"
	"github.com/berthhq/berth/sandbox"
	"github.com/berthhq/berth/subscription"
	"github.com/berthhq/berth/wasm/abi"
)

// benchGuest is one kind of processor running samples/bench's handler.
type benchGuest struct {
	kind  string // the sub-benchmark's name
	pkg   string // the guest's package (a crate if rust), built with testbuild
	sub   string // its subscription
	event string // the type of the events appended for it; "" is OrderPlaced
	rust  bool
}

// eventType is the type of the events appended for g.
func (g benchGuest) eventType() string {
	if g.event == "" {
		return "OrderPlaced"
	}
	return g.event
}

var benchGuests = []benchGuest{
	{kind: "reactor", pkg: "registry/testdata/benchreactor", sub: "OrderTotalsReactor.onOrderPlaced"},
	{kind: "projection", pkg: "samples/bench", sub: "OrderTotals.onOrderPlaced"},
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
// configuration (assembly: Badger log and ledger, the sandbox, the
// engine's 16 partitions x 4), as a reactor and as a projection, beside the
// pool ceiling of the same guest in the same run: the module called
// directly on the sandbox by as many goroutines as its pool has instances.
// events/s is the host's, ceiling-events/s the pool's, ratio the first over
// the second. Each runs with store.sync "always" (the default: every write
// fsynced) and "none". notifier-go and notifier-rs are the ShipmentNotifier
// in Go and in Rust on its no-op path (an event without owner), side by side.
//
//	go test ./registry -run '^$' -bench BenchmarkDeliverWasm -benchtime 20000x -count 5
func BenchmarkDeliverWasm(b *testing.B) {
	guests, wasm, err := deliverWasmGuests()
	if err != nil {
		b.Fatal(err)
	}
	cache := b.TempDir() // shared, so that each host loads the guest from the compilation cache
	for _, g := range guests {
		for _, mode := range []string{config.SyncAlways, config.SyncNone} {
			b.Run(g.kind+"/sync="+mode, func(b *testing.B) {
				asm, cfg := openSynced(b, mode, cache)
				defer asm.Close(context.Background())
				benchDeliverWasm(b, g, wasm[g.kind], cfg, benchHost{events: asm.Events, sandbox: asm.Sandbox, engine: asm.Engine, modules: asm.Modules})
			})
		}
	}
}

// openSynced opens a host of the default configuration (benchConfig) with
// store.sync mode, its compilation cache in cache; the caller closes it
// (b.Cleanup would keep the host of the first, one-iteration call open
// through the timed one).
func openSynced(b *testing.B, mode, cache string) (*assembly.Host, *config.Config) {
	b.Helper()
	cfg := benchConfig(b)
	cfg.Store.Sync = mode
	asm, err := assembly.Open(context.Background(), cfg, assembly.Options{WasmCacheDir: cache})
	if err != nil {
		b.Fatal(err)
	}
	return asm, cfg
}

// benchHost is what benchDeliverWasm uses of a host.
type benchHost struct {
	events  eventlog.Log
	sandbox *sandbox.Sandbox
	engine  *subscription.Engine
	modules *registry.Registry
	// ledgerTx returns how many transactions the ledger has committed, or
	// is nil for a ledger that does not tell.
	ledgerTx func() uint64
	// apiRequests returns how many JetStream API requests the servers have
	// answered, or is nil off JetStream.
	apiRequests func() uint64
}

// benchConfig is the default configuration over a data directory of b's,
// with the sandbox on compiled code only: with tier-up (the default) a
// module missing from the cache would start on the interpreter for its
// first second or so, whose cost is BenchmarkColdStart's (sandbox), not
// this comparison's.
func benchConfig(b *testing.B) *config.Config {
	cfg := config.Default()
	cfg.Server.DataDir = b.TempDir()
	cfg.SandboxConfig.TierUp = false
	return cfg
}

// benchDeliverWasm appends b.N events for g's subscription while it is
// paused, timing the appends (the first half one after another, the second
// by 16 appenders at once), then times their delivery by h beside the pool
// ceiling.
func benchDeliverWasm(b *testing.B, g benchGuest, wasm []byte, cfg *config.Config, h benchHost) {
	ctx := context.Background()
	info, _, err := h.modules.Put(ctx, "bench", wasm)
	if err != nil {
		b.Fatal(err)
	}
	// Paused while the events are appended, so that what is timed is the
	// delivery alone; the module's other subscriptions (samples/bench's
	// noop) stay paused, so that neither the appends nor the delivery share
	// the machine with their reading of the log.
	for _, sub := range info.Subscriptions {
		if err := h.engine.Pause(ctx, sub, subscription.Caller{}); err != nil {
			b.Fatal(err)
		}
	}
	serial, parallel := benchAppend(b, h.events, b.N, g.eventType())
	// The ceiling is measured half before and half after the delivery, so
	// that a change in the shared machine's load during the run weighs on
	// both figures alike.
	before := poolCeiling(b, h.sandbox, cfg, wasm, b.N/2, g.eventType())

	var txBefore, apiBefore uint64
	if h.ledgerTx != nil {
		txBefore = h.ledgerTx()
	}
	if h.apiRequests != nil {
		apiBefore = h.apiRequests()
	}
	b.ResetTimer()
	start := time.Now()
	if err := h.engine.Unpause(ctx, g.sub, subscription.Caller{}); err != nil {
		b.Fatal(err)
	}
	awaitDelivered(b, h.engine, g.sub)
	elapsed := time.Since(start)
	b.StopTimer()
	if h.ledgerTx != nil {
		// How many events each of the delivery's ledger transactions
		// carried (group commits, checkpoints), on a ledger that counts them.
		b.ReportMetric(float64(b.N)/float64(max(h.ledgerTx()-txBefore, 1)), "events/ledger-tx")
	}
	if h.apiRequests != nil {
		// Stream infos and gets of the delivery (the Status polls' included).
		b.ReportMetric(float64(h.apiRequests()-apiBefore)/float64(b.N), "api-req/event")
	}
	after := poolCeiling(b, h.sandbox, cfg, wasm, b.N-b.N/2, g.eventType())
	ceiling := float64(b.N) / (before + after).Seconds()
	rate := float64(b.N) / elapsed.Seconds()
	b.ReportMetric(rate, "events/s")
	b.ReportMetric(ceiling, "ceiling-events/s")
	b.ReportMetric(rate/ceiling, "ratio")
	if serial > 0 {
		b.ReportMetric(serial, "appends/s-serial")
	}
	if parallel > 0 {
		b.ReportMetric(parallel, "appends/s-par16")
	}
}

// awaitDelivered waits until sub has handled every commit in the log, and
// fails b if any aggregate was parked.
func awaitDelivered(b *testing.B, engine *subscription.Engine, sub string) {
	b.Helper()
	for {
		st, err := engine.Status(context.Background(), sub)
		if err != nil {
			b.Fatal(err)
		}
		if st.Lag == 0 {
			for state, n := range st.Parked {
				if n > 0 {
					b.Fatalf("%d aggregates %s: the guest failed", n, state)
				}
			}
			return
		}
		// Not every millisecond: a Status reads the log's head and the
		// ledger, on JetStream a round trip each.
		time.Sleep(5 * time.Millisecond)
	}
}

// benchAppenders is how many goroutines append at once in the parallel
// half of benchAppend (as eventlog's BenchmarkAppend/parallel16).
const benchAppenders = 16

// benchAppend appends n one-event commits of samples/bench's order (of type
// eventType) over
// benchAggregates aggregates, the first half one after another and the
// second by benchAppenders goroutines, and returns each half's appends per
// second (0 for a half too small to time).
func benchAppend(b *testing.B, events eventlog.Log, n int, eventType string) (serial, parallel float64) {
	b.Helper()
	ctx := context.Background()
	appendOne := func(i int) error {
		_, err := events.Append(ctx, eventlog.AppendRequest{AggregateType: "Order",
			AggregateID: fmt.Sprint("ord-", i%benchAggregates), ExpectedVersion: eventlog.AnyVersion,
			Events: []eventlog.Event{{Type: eventType, Payload: summary.Payload}}})
		return err
	}
	half := n / 2
	start := time.Now()
	for i := range half {
		if err := appendOne(i); err != nil {
			b.Fatal(err)
		}
	}
	if half >= benchAppenders {
		serial = float64(half) / time.Since(start).Seconds()
	}
	var next atomic.Int64
	next.Store(int64(half))
	var failed atomic.Value
	var wg sync.WaitGroup
	start = time.Now()
	for range benchAppenders {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				if err := appendOne(int(i)); err != nil {
					failed.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	if n-half >= benchAppenders {
		parallel = float64(n-half) / time.Since(start).Seconds()
	}
	return serial, parallel
}

// poolCeiling returns how long n calls of the guest's handler take when
// made directly on a module of its own in sandbox sb, by as many
// goroutines as the pool has instances: what the host's delivery could
// reach if the engine and the stores cost nothing.
func poolCeiling(b *testing.B, sb *sandbox.Sandbox, cfg *config.Config, wasm []byte, n int, eventType string) time.Duration {
	b.Helper()
	ctx := context.Background()
	mod, err := sb.Load(ctx, "ceiling", wasm, cfg.Module("ceiling"))
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
				ev := abi.Event{Handler: handler, InvocationKey: fmt.Sprint("k", i), Attempt: 1, Type: eventType,
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
