package assembly_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/assembly"
	"github.com/berthhq/berth/config"
	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/internal/testing/natstest"
	"github.com/berthhq/berth/internal/testing/testbuild"
)

// Several hosts in one process on one in-process NATS server, each with its
// own data directory and host id, all with store.backend "jetstream": one
// deployment, sharing the event log, the ledger and the modules.

// handledLog keeps, by invocation key, the "handled" lines the eachevent
// guest logs on one host.
type handledLog struct {
	mu   sync.Mutex
	keys map[string]int
}

func (l *handledLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *handledLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *handledLog) WithGroup(string) slog.Handler            { return l }
func (l *handledLog) Handle(_ context.Context, r slog.Record) error {
	if !strings.HasPrefix(r.Message, "handled") {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "key" {
			l.mu.Lock()
			l.keys[a.Value.String()]++
			l.mu.Unlock()
		}
		return true
	})
	return nil
}

func (l *handledLog) snapshot() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.keys)
}

// member is one host of a test deployment.
type member struct {
	id      string
	h       *assembly.Host
	handled *handledLog
}

// clusterConfig is testConfig on backend jetstream at url, as host id.
func clusterConfig(t *testing.T, url, id string) *config.Config {
	cfg := testConfig(t.TempDir())
	cfg.Store.Backend = config.BackendJetStream
	cfg.Store.JetStream.URLs = []string{url}
	cfg.Cluster.HostID = id
	cfg.Cluster.LeaseTTL = config.MinLeaseTTL
	// Checkpoints as often as a host writes them: every 10ms on three hosts
	// would load the shared ledger for nothing.
	cfg.Subscription.CheckpointInterval = config.DefaultCheckpointInterval
	return cfg
}

// openMembers opens a host per id on url, sharing one compilation cache.
func openMembers(t *testing.T, url string, mutate func(*config.Config), ids ...string) []*member {
	t.Helper()
	cache := t.TempDir()
	var out []*member
	for _, id := range ids {
		cfg := clusterConfig(t, url, id)
		if mutate != nil {
			mutate(cfg)
		}
		m := &member{id: id, handled: &handledLog{keys: map[string]int{}}}
		m.h = open(t, cfg, assembly.Options{Logger: slog.New(m.handled), WasmCacheDir: cache})
		out = append(out, m)
	}
	return out
}

// owners returns which host owns each partition of sub by the hosts'
// clusters, and false unless every partition has exactly one.
func owners(ms []*member, sub string, partitions int) ([]string, bool) {
	got := make([]string, partitions)
	for _, m := range ms {
		for p := range m.h.Cluster.Owned()[sub] {
			if got[p] != "" {
				return got, false
			}
			got[p] = m.id
		}
	}
	return got, !slices.Contains(got, "")
}

const eachEventSub = "EachEvent.onEvent"

// TestClusterSharesThePartitions: three hosts split the partitions of a
// subscription deployed on one of them; every event appended on any host is
// handled once, by the host owning its partition; a host that closes hands
// its partitions to the two others, which then handle everything.
func TestClusterSharesThePartitions(t *testing.T) {
	wasm, err := testbuild.Bytes("registry/testdata/eachevent")
	if err != nil {
		t.Fatal(err)
	}
	srv := natstest.RunServer(t)
	ms := openMembers(t, srv.URL(), nil, "h1", "h2", "h3")
	ctx := t.Context()
	if _, _, err := ms[0].h.Modules.Put(ctx, "each-event", wasm); err != nil {
		t.Fatal(err)
	}
	parts := ms[0].h.Config().Subscription.Partitions
	// Each host compiles the module it is told of before it has the
	// subscription: on a loaded machine, under -race, that takes a while.
	checkfor.Nil(t, time.Minute, 5*time.Millisecond, func() error {
		got, ok := owners(ms, eachEventSub, parts)
		if !ok {
			return fmt.Errorf("partition owners %q, not every partition owned once", got)
		}
		for _, m := range ms {
			if !slices.Contains(got, m.id) {
				return fmt.Errorf("partition owners %q, none %s's", got, m.id)
			}
		}
		return nil
	})

	appendOn := func(ms []*member, from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			if _, err := ms[i%len(ms)].h.Events.Append(ctx, eventlog.AppendRequest{AggregateType: "Thing", AggregateID: fmt.Sprint("t", i),
				ExpectedVersion: eventlog.AnyVersion, Events: []eventlog.Event{{Type: "Happened"}}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// handledOnce waits until n events were handled, then checks that each
	// was handled once in all, by the host owning its partition.
	handledOnce := func(ms []*member, n int) {
		t.Helper()
		checkfor.Eventually(t, func() error {
			total := 0
			for _, m := range ms {
				for _, c := range m.handled.snapshot() {
					total += c
				}
			}
			if total < n {
				return fmt.Errorf("%d events handled, want %d", total, n)
			}
			return nil
		})
		by := map[string]string{}
		for _, m := range ms {
			for k, c := range m.handled.snapshot() {
				if c != 1 || by[k] != "" {
					t.Fatalf("%s handled on %s %d times, and on %q", k, m.id, c, by[k])
				}
				by[k] = m.id
			}
		}
		if len(by) != n {
			t.Fatalf("%d events handled, want %d", len(by), n)
		}
		hosts := map[string]bool{}
		for _, id := range by {
			hosts[id] = true
		}
		if len(hosts) != len(ms) {
			t.Fatalf("events handled on %v, want every one of %d hosts", slices.Collect(maps.Keys(hosts)), len(ms))
		}
	}
	appendOn(ms, 0, 40)
	handledOnce(ms, 40)

	if err := ms[2].h.Close(ctx); err != nil {
		t.Fatal(err)
	}
	rest := ms[:2]
	checkfor.Eventually(t, func() error { return ownedBy(rest, eachEventSub, parts, "h1", "h2") })
	for _, m := range rest {
		clear(m.handled.keys)
	}
	appendOn(rest, 40, 80)
	handledOnce(rest, 40)
}
