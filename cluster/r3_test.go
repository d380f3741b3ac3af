package cluster

import (
	"testing"
	"time"

	"github.com/berthhq/berth/internal/checkfor"
	"github.com/berthhq/berth/internal/natstest"
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
	checkfor.Cond(t, 10*time.Second, 20*time.Millisecond, "3 hosts splitting 2 x 16 partitions", func() bool {
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
	checkfor.Cond(t, 2*ttl, 50*time.Millisecond, "every host renewing twice with a node down", func() bool {
		for i, h := range hosts {
			if h.c.Stats().Renewals < stats[i].Renewals+2 {
				return false
			}
		}
		return true
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
	if !settled(t, st, hosts, subs, partitions) {
		t.Fatal("ownership changed with a NATS node down")
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
