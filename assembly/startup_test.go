package assembly_test

import (
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/assembly"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/internal/testing/natstest"
	"github.com/berthhq/berth/internal/testing/testbuild"
)

// TestHostsStartTogetherOnAFreshCluster: three hosts opened at the same
// moment on a three-node NATS cluster that has no Berth streams yet (R3)
// all open — each creates, or finds another creating, the event log, the
// ledger, the modules and the membership bucket — and share the partitions.
// This is the README's walkthrough, where hosts started together failed with
// "no answer from NATS" and "context deadline exceeded" while the cluster
// placed the new streams.
func TestHostsStartTogetherOnAFreshCluster(t *testing.T) {
	c := natstest.RunCluster(t, 3)
	ids := []string{"h1", "h2", "h3"}
	hosts := make([]*assembly.Host, len(ids))
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		cfg := clusterConfig(t, c.URLs(), id)
		cfg.Store.JetStream.URLs = []string{c.Nodes[i].URL()}
		cfg.Store.JetStream.Replicas = 3
		wg.Go(func() {
			hosts[i], errs[i] = assembly.Open(t.Context(), cfg, assembly.Options{Logger: slog.New(slog.DiscardHandler)})
		})
	}
	wg.Wait()
	for i, h := range hosts {
		if h != nil {
			t.Cleanup(func() { h.Close(t.Context()) })
		}
		if errs[i] != nil {
			t.Errorf("open %s: %v", ids[i], errs[i])
		}
	}
	if t.Failed() {
		return
	}
	checkfor.Nil(t, time.Minute, 10*time.Millisecond, func() error {
		for i, h := range hosts {
			if m := h.Cluster.Members(); len(m) != len(ids) {
				return fmt.Errorf("%s sees %d members, want %d", ids[i], len(m), len(ids))
			}
		}
		return nil
	})
}

// TestUploadsOnTwoHostsAtOnce: two deployers pushing new builds of the same
// module to two hosts at the same moment each get a version of their own —
// no number is given twice — and both hosts end on the same current version.
// Each upload's bytes differ (a custom section naming it): bytes already
// current would change nothing.
func TestUploadsOnTwoHostsAtOnce(t *testing.T) {
	wasm, err := testbuild.Bytes("registry/testdata/eachevent")
	if err != nil {
		t.Fatal(err)
	}
	srv := natstest.RunServer(t)
	ms := openMembers(t, srv.URL(), nil, "h1", "h2")
	const each = 4
	var mu sync.Mutex
	var got []int
	var wg sync.WaitGroup
	for _, m := range ms {
		wg.Go(func() {
			for i := range each {
				info, _, err := m.h.Modules.Put(t.Context(), "each-event", testbuild.Rebuilt(wasm, fmt.Sprintf("%s-%d", m.id, i)))
				if err != nil {
					t.Errorf("put on %s: %v", m.id, err)
					return
				}
				mu.Lock()
				got = append(got, info.Version)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.Sort(got)
	want := make([]int, 2*each)
	for i := range want {
		want[i] = i + 1
	}
	if !slices.Equal(got, want) {
		t.Fatalf("versions given %v, want %v (each once)", got, want)
	}
	checkfor.Eventually(t, func() error {
		a, okA := ms[0].h.Modules.Get("each-event")
		b, okB := ms[1].h.Modules.Get("each-event")
		if !okA || !okB || a.Version != b.Version {
			return fmt.Errorf("each-event at version %d on h1 (%v), %d on h2 (%v), want both on the same", a.Version, okA, b.Version, okB)
		}
		return nil
	})
}
