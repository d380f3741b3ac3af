package cluster

import (
	"fmt"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/internal/testing/natstest"
	"github.com/nats-io/nats.go/jetstream"
)

// TestNATSNodeDown: on a three-node NATS cluster with the membership bucket
// at R3, shutting down the node that leads the bucket's stream changes no
// ownership: every host renews through the other two, nobody gives up,
// claims or loses a partition, and every epoch stays.
func TestNATSNodeDown(t *testing.T) {
	const ttl = 10 * time.Second
	nc := natstest.RunCluster(t, 3)
	st := openLedger(t)
	var hosts []*host
	for _, id := range []string{"h1", "h2", "h3"} {
		hosts = append(hosts, startHost(t, nc.URLs(), id, st, Options{Subscriptions: subs, LeaseTTL: ttl, Replicas: 3}))
	}
	checkfor.Nil(t, 10*time.Second, 20*time.Millisecond, func() error {
		return settled(t, st, hosts, subs, partitions)
	})
	before := map[string][]claim{}
	for _, sub := range subs {
		before[sub] = ledgerOwners(t, st, sub, partitions)
	}
	stats := make([]Stats, len(hosts))
	for i, h := range hosts {
		stats[i] = h.c.Stats()
	}

	js, err := jetstream.New(connect(t, nc.URLs()))
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(t.Context(), "KV_"+DefaultBucket)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(t.Context())
	if err != nil || info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
		t.Fatalf("membership stream %+v: %v", info, err)
	}
	var leader *natstest.Node
	for _, n := range nc.Nodes {
		if n.Name() == info.Cluster.Leader {
			leader = n
		}
	}
	if leader == nil {
		t.Fatalf("no node leads the membership stream (%q)", info.Cluster.Leader)
	}
	down := time.Now()
	leader.Shutdown()
	// Two renewals of every host after the shutdown: each went through the
	// remaining nodes, the new stream leader among them.
	checkfor.Nil(t, 2*ttl, 50*time.Millisecond, func() error {
		for i, h := range hosts {
			if s := h.c.Stats(); s.Renewals < stats[i].Renewals+2 {
				return fmt.Errorf("%s renewed %d times with a node down, want 2: %+v", h.id, s.Renewals-stats[i].Renewals, s)
			}
		}
		return nil
	})
	failed := uint64(0)
	for i, h := range hosts {
		failed += h.c.Stats().RenewalFailures - stats[i].RenewalFailures
	}
	t.Logf("two renewals each within %v of the shutdown; %d attempts failed meanwhile", time.Since(down), failed)
	for i, h := range hosts {
		s := h.c.Stats()
		if s.GiveUps != 0 || s.LeasesLost != 0 || s.Lost != 0 || s.Claims != stats[i].Claims || s.Releases != stats[i].Releases {
			t.Fatalf("%s: stats %+v, before the shutdown %+v", h.id, s, stats[i])
		}
	}
	if err := settled(t, st, hosts, subs, partitions); err != nil {
		t.Fatalf("ownership changed with a NATS node down: %v", err)
	}
	for _, sub := range subs {
		after := ledgerOwners(t, st, sub, partitions)
		for p := range partitions {
			if after[p] != before[sub][p] {
				t.Fatalf("%s/%d: %+v, before the shutdown %+v", sub, p, after[p], before[sub][p])
			}
		}
	}
	assertNoOverlap(t, hosts, subs, partitions)
}
