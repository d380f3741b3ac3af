package registry_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/berthhq/berth/config"
	"github.com/berthhq/berth/eventlog"
	jslog "github.com/berthhq/berth/eventlog/jetstream"
	"github.com/berthhq/berth/internal/testing/natstest"
	"github.com/berthhq/berth/ledger"
	jsledger "github.com/berthhq/berth/ledger/jetstream"
	"github.com/berthhq/berth/registry"
	"github.com/berthhq/berth/sandbox"
	"github.com/berthhq/berth/subscription"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// benchBackend is where a benchmark host keeps its event log and its
// failure ledger: both on Badger (urls empty), or both on JetStream at
// urls with replicas.
type benchBackend struct {
	name     string
	urls     string
	replicas int
	servers  []*natstest.Node
}

// apiRequests returns how many JetStream API requests (stream info, direct
// gets, consumer calls; not publishes) be's servers have answered, or nil
// on Badger.
func (be benchBackend) apiRequests() func() uint64 {
	if be.servers == nil {
		return nil
	}
	return func() uint64 {
		var n uint64
		for _, s := range be.servers {
			if info, err := s.Server().Jsz(nil); err == nil {
				n += info.API.Total
			}
		}
		return n
	}
}

// BenchmarkDeliverBackends is BenchmarkDeliverWasm's reactor and projection
// on each store backend in one run: the event log and the ledger both on
// Badger, both on JetStream on one in-process NATS node (R1), and both on a
// three-node in-process cluster (R3), as a cluster-mode host keeps them.
// Each sub-benchmark also times the appends of its events (appends/s-serial,
// appends/s-par16). The NATS servers are started once and shared; each host
// has streams of its own.
//
//	go test ./registry -run '^$' -bench BenchmarkDeliverBackends -benchtime 4000x -count 1
func BenchmarkDeliverBackends(b *testing.B) {
	wasm, err := benchWasm()
	if err != nil {
		b.Fatal(err)
	}
	cache := b.TempDir()
	one, three := natstest.RunServer(b), natstest.RunCluster(b, 3)
	backends := []benchBackend{
		{name: "badger"},
		{name: "jetstream-R1", urls: one.URL(), replicas: 1, servers: []*natstest.Node{one}},
		{name: "jetstream-R3", urls: three.URLs(), replicas: 3, servers: three.Nodes},
	}
	hosts := 0 // names each host's streams
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			for _, g := range benchGuests {
				b.Run(g.kind, func(b *testing.B) {
					hosts++
					cfg := benchConfig(b)
					h := openBenchHost(b, cfg, cache, be, fmt.Sprint("BENCH", hosts))
					benchDeliverWasm(b, g, wasm[g.kind], cfg, h)
				})
			}
		})
	}
}

// openBenchHost opens the parts of a host benchDeliverWasm uses over be's
// stores, closed when b ends: the event log and the ledger, the sandbox
// (compilation cache in cache), the engine (started), the projections'
// query store and the registry. On JetStream the event log is the stream
// S and the ledger the stream S_LEDGER (S = stream), each host's own.
//
// It is assembled here rather than by assembly, whose ledger was
// Badger whatever the event log when this was written; the parts and their
// options are the assembly's (cfg's engine options and sandbox, the registry
// over the projections), without cluster mode (no leases, no fencing).
func openBenchHost(b *testing.B, cfg *config.Config, cache string, be benchBackend, stream string) benchHost {
	b.Helper()
	ctx := context.Background()
	var closers []func() error
	b.Cleanup(func() {
		var errs []error
		for i := len(closers) - 1; i >= 0; i-- {
			errs = append(errs, closers[i]())
		}
		if err := errors.Join(errs...); err != nil {
			b.Error(err)
		}
	})
	var events eventlog.Log
	var store ledger.Store
	var ledgerTx func() uint64
	if be.urls == "" {
		l, err := eventlog.Open(cfg.EventLogDir(), eventlog.Options{})
		if err != nil {
			b.Fatal(err)
		}
		closers = append(closers, func() error { return l.Close(ctx) })
		events = l
		st, err := ledger.Open(cfg.LedgerDir(), ledger.Options{})
		if err != nil {
			b.Fatal(err)
		}
		closers = append(closers, func() error { return st.Close(ctx) })
		store = st
	} else {
		nc, err := nats.Connect(be.urls)
		if err != nil {
			b.Fatal(err)
		}
		closers = append(closers, func() error { nc.Close(); return nil })
		l, err := jslog.Open(ctx, nc, jslog.Options{Stream: stream, Prefix: strings.ToLower(stream), Replicas: be.replicas})
		if err != nil {
			b.Fatal(err)
		}
		closers = append(closers, func() error { return l.Close(ctx) })
		events = l
		st, err := jsledger.Open(ctx, nc, jsledger.Options{Stream: stream + "_LEDGER", Subject: stream + "_LEDGER.tx",
			Replicas: be.replicas, Dir: cfg.LedgerDir()})
		if err != nil {
			b.Fatal(err)
		}
		closers = append(closers, func() error { return st.Close(ctx) })
		store = st
		ledgerTx = streamLastSeq(b, nc, stream+"_LEDGER")
	}
	sb := cfg.Sandbox()
	sb.CacheDir = cache
	box, err := sandbox.New(sb)
	if err != nil {
		b.Fatal(err)
	}
	closers = append(closers, func() error { return box.Close(ctx) })
	eng, err := cfg.EngineOptions()
	if err != nil {
		b.Fatal(err)
	}
	engine, err := subscription.Open(events, store, eng)
	if err != nil {
		b.Fatal(err)
	}
	proj := registry.NewProjections(store, func() int { return cfg.Subscription.ProjectionWriters }, nil)
	closers = append(closers, func() error { proj.Wait(); return nil })
	closers = append(closers, func() error { return engine.Close(ctx) })
	modules, err := registry.Open(ctx, registry.Options{Dir: cfg.ModulesDir(), Sandbox: box, Engine: engine,
		Settings: func() registry.Settings { return cfg }, Projections: proj})
	if err != nil {
		b.Fatal(err)
	}
	if err := engine.Start(ctx); err != nil {
		b.Fatal(err)
	}
	return benchHost{events: events, sandbox: box, engine: engine, modules: modules, ledgerTx: ledgerTx,
		apiRequests: be.apiRequests()}
}

// streamLastSeq returns a function that reads the last sequence of the
// stream name: for the ledger's stream, how many transactions it has
// committed (one message each).
func streamLastSeq(b *testing.B, nc *nats.Conn, name string) func() uint64 {
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	return func() uint64 {
		s, err := js.Stream(context.Background(), name)
		if err != nil {
			b.Fatal(err)
		}
		info, err := s.Info(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		return info.State.LastSeq
	}
}
