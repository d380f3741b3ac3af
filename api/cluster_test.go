package api

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/api/wire"
	"github.com/berthhq/berth/cluster"
	"github.com/berthhq/berth/cluster/clustertest"
	"github.com/berthhq/berth/config"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/internal/testing/natstest"
	"github.com/berthhq/berth/ledger"
)

// TestClusterSingleHost: a single host answers GET /v1/cluster with mode
// single, itself as the one host, and every partition of every subscription
// its own — not a 404.
func TestClusterSingleHost(t *testing.T) {
	h := newHost(t, "")
	if r := h.upload("shipment-notifier", ""); r.status != http.StatusCreated {
		t.Fatalf("upload: %s", r)
	}
	var got wire.Cluster
	h.do(req{method: "GET", path: "/v1/cluster"}).json(t, &got)
	name, _ := os.Hostname()
	if got.Mode != wire.ClusterModeSingle || got.Host != name || got.Partitions != config.DefaultPartitions || got.LeaseTTL != "" ||
		got.Stats != nil || got.Unowned != 0 {
		t.Errorf("single host: %+v", got)
	}
	if len(got.Hosts) != 1 || got.Hosts[0].ID != name || !got.Hosts[0].Self || got.Hosts[0].Owned != config.DefaultPartitions ||
		got.Hosts[0].LeaseAge != "" {
		t.Errorf("hosts %+v, want this one, owning all %d partitions", got.Hosts, config.DefaultPartitions)
	}
	if len(got.Subscriptions) != 1 || got.Subscriptions[0].Name != notifierSub {
		t.Fatalf("subscriptions %+v, want %s", got.Subscriptions, notifierSub)
	}
	sub := got.Subscriptions[0]
	if len(sub.Partitions) != config.DefaultPartitions || len(sub.Unowned) != 0 {
		t.Fatalf("%s: %d partitions, unowned %v", sub.Name, len(sub.Partitions), sub.Unowned)
	}
	for i, p := range sub.Partitions {
		if p != (wire.PartitionOwner{Index: i, State: wire.PartitionOwned, Owner: name, Assigned: name}) {
			t.Errorf("partition %d: %+v", i, p)
		}
	}
}

// TestToWireCluster: each partition's state comes from its ledger claim and
// whether its owner is live; the unowned are listed and counted, and each
// host counts what it owns.
func TestToWireCluster(t *testing.T) {
	renewed := time.Date(2026, 12, 3, 18, 0, 0, 0, time.UTC)
	members := []cluster.Member{
		{Host: "a", Address: "http://a:8080", Version: "v1", Started: renewed.Add(-time.Hour), Renewed: renewed, LeaseAge: 1234567 * time.Microsecond, Self: true},
		{Host: "b", Renewed: renewed, LeaseAge: 2 * time.Second},
	}
	as := []cluster.Assignment{
		{Subscription: "m", Partition: 0, Host: "a", Owner: "a", Epoch: 3},
		{Subscription: "m", Partition: 1, Host: "b", Owner: "a", Epoch: 2},                 // moving: still a's
		{Subscription: "m", Partition: 2, Host: "b", Owner: "c", Epoch: 5},                 // c is gone
		{Subscription: "m", Partition: 3, Host: "a", Owner: "b", Epoch: 4, Released: true}, // b let it go
		{Subscription: "n", Partition: 0, Host: "b"},                                       // never claimed
		{Subscription: "n", Partition: 1, Host: "b", Owner: "b", Epoch: 1},
	}
	got := toWireCluster(clusterSettings{"a", 15 * time.Second, 2}, members, as, cluster.Stats{Claims: 7, Lost: 1})
	if got.Mode != wire.ClusterModeCluster || got.Host != "a" || got.LeaseTTL != "15s" || got.Partitions != 2 || got.Unowned != 3 {
		t.Errorf("cluster %+v", got)
	}
	wantHosts := []wire.ClusterHost{
		{ID: "a", Address: "http://a:8080", Version: "v1", Joined: renewed.Add(-time.Hour), LastRenewal: renewed, LeaseAge: "1.235s", Self: true, Owned: 2},
		{ID: "b", LastRenewal: renewed, LeaseAge: "2s", Owned: 1},
	}
	if !slices.Equal(got.Hosts, wantHosts) {
		t.Errorf("hosts\n%+v, want\n%+v", got.Hosts, wantHosts)
	}
	tests := []struct {
		sub     string
		states  []string
		unowned []int
	}{
		{"m", []string{wire.PartitionOwned, wire.PartitionOwned, wire.PartitionOrphaned, wire.PartitionReleased}, []int{2, 3}},
		{"n", []string{wire.PartitionUnclaimed, wire.PartitionOwned}, []int{0}},
	}
	if len(got.Subscriptions) != len(tests) {
		t.Fatalf("subscriptions %+v", got.Subscriptions)
	}
	for i, tt := range tests {
		s := got.Subscriptions[i]
		var states []string
		for _, p := range s.Partitions {
			states = append(states, p.State)
		}
		if s.Name != tt.sub || !slices.Equal(states, tt.states) || !slices.Equal(s.Unowned, tt.unowned) {
			t.Errorf("subscription %s: states %v, unowned %v; want %s %v, %v", s.Name, states, s.Unowned, tt.sub, tt.states, tt.unowned)
		}
	}
	if p := got.Subscriptions[0].Partitions[3]; p.Owner != "b" || p.Epoch != 4 || p.Assigned != "a" {
		t.Errorf("released partition %+v: want owner b (who let it go), epoch 4, assigned a", p)
	}
	if got.Stats == nil || got.Stats.Claims != 7 || got.Stats.Lost != 1 {
		t.Errorf("stats %+v", got.Stats)
	}
	if !slices.Equal(wire.PartitionStates(), []string{"owned", "released", "orphaned", "unclaimed"}) {
		t.Errorf("partition states %v", wire.PartitionStates()) // openapi.json's enum
	}
}

// clusterHost is one host of TestClusterHosts: a real cluster.Cluster
// (cluster/clustertest) and an API over it.
type clusterHost struct {
	id string
	*clustertest.Host
	api *Server
}

func startClusterHost(t *testing.T, url, id string, st ledger.Store, subs []string) *clusterHost {
	t.Helper()
	h := clustertest.Join(t, url, id, st, subs...)
	return &clusterHost{id: id, Host: h, api: New(Deps{Config: config.Default, Cluster: h.Cluster})}
}

// clusterOf asks h's API for GET /v1/cluster, checking the answer against
// openapi.json.
func (h *clusterHost) clusterOf(t *testing.T) wire.Cluster {
	t.Helper()
	r := serve(h.api, req{method: "GET", path: "/v1/cluster"})
	checkResponse(t, h.api, "GET", "/v1/cluster", r)
	if r.status != http.StatusOK {
		t.Fatalf("GET /v1/cluster on %s: %s", h.id, r)
	}
	var out wire.Cluster
	r.json(t, &out)
	return out
}

// settledOn says how v falls short of showing exactly hosts, every
// partition owned by the host it is assigned to; nil once it does.
func settledOn(v wire.Cluster, hosts ...string) error {
	var ids []string
	for _, h := range v.Hosts {
		ids = append(ids, h.ID)
	}
	if !slices.Equal(ids, hosts) || v.Unowned != 0 {
		return fmt.Errorf("hosts %v, %d partitions unowned", ids, v.Unowned)
	}
	for _, s := range v.Subscriptions {
		for i, p := range s.Partitions {
			if p.State != wire.PartitionOwned || p.Owner != p.Assigned {
				return fmt.Errorf("%s partition %d %s by %q, assigned to %q", s.Name, i, p.State, p.Owner, p.Assigned)
			}
		}
	}
	return nil
}

// TestClusterHosts runs GET /v1/cluster over three real clusters on one
// in-process NATS node and a shared ledger: every host answers the same
// owners, each with itself marked; a host that dies (its connection gone,
// no goodbye) leaves the list and its partitions go to the others at a
// higher epoch; with NATS down the answer is a 503 naming it.
func TestClusterHosts(t *testing.T) {
	n := natstest.RunServer(t)
	st := clustertest.Ledger(t)
	subs := []string{"mailer", "orders-projection"}
	var hosts []*clusterHost
	for _, id := range []string{"h1", "h2", "h3"} {
		hosts = append(hosts, startClusterHost(t, n.URL(), id, st, subs))
	}
	var v wire.Cluster
	checkfor.Nil(t, 15*time.Second, 50*time.Millisecond, func() error {
		v = hosts[0].clusterOf(t)
		return settledOn(v, "h1", "h2", "h3")
	})
	if v.Mode != wire.ClusterModeCluster || v.Host != "h1" || v.LeaseTTL != "3s" || v.Partitions != cluster.DefaultPartitions ||
		len(v.Subscriptions) != 2 || v.Subscriptions[0].Name != "mailer" || v.Stats == nil || v.Stats.Renewals == 0 {
		t.Errorf("GET /v1/cluster on h1: %+v", v)
	}
	total := 0
	for i, h := range v.Hosts {
		age, err := time.ParseDuration(h.LeaseAge)
		if err != nil || age < 0 || age > 3*time.Second || h.LastRenewal.IsZero() || h.Joined.IsZero() {
			t.Errorf("host %s: lease age %q (%v), last renewal %v, joined %v", h.ID, h.LeaseAge, err, h.LastRenewal, h.Joined)
		}
		if h.Self != (i == 0) || h.Address != "http://"+h.ID+".example:8080" || h.Version != "test" {
			t.Errorf("host %+v", h)
		}
		total += h.Owned
	}
	if total != 2*cluster.DefaultPartitions {
		t.Errorf("hosts own %d partitions, want %d", total, 2*cluster.DefaultPartitions)
	}
	// Every host reads the owners from the one ledger.
	for _, h := range hosts[1:] {
		other := h.clusterOf(t)
		if !slices.EqualFunc(other.Subscriptions, v.Subscriptions, func(a, b wire.ClusterSubscription) bool {
			return a.Name == b.Name && slices.Equal(a.Partitions, b.Partitions)
		}) {
			t.Errorf("%s answers other owners than h1:\n%+v\n%+v", h.id, other.Subscriptions, v.Subscriptions)
		}
		if self := slices.IndexFunc(other.Hosts, func(x wire.ClusterHost) bool { return x.Self }); self < 0 || other.Hosts[self].ID != h.id {
			t.Errorf("%s marks %+v as itself", h.id, other.Hosts)
		}
	}

	// h3 dies: its connection drops and it never says goodbye. Once its
	// lease runs out, h1 and h2 own everything, h3's old partitions at a
	// higher epoch.
	before := map[string]map[int]uint64{}
	for _, s := range v.Subscriptions {
		before[s.Name] = map[int]uint64{}
		for _, p := range s.Partitions {
			if p.Owner == "h3" {
				before[s.Name][p.Index] = p.Epoch
			}
		}
	}
	hosts[2].Conn.Close()
	checkfor.Nil(t, 20*time.Second, 50*time.Millisecond, func() error {
		v = hosts[0].clusterOf(t)
		return settledOn(v, "h1", "h2")
	})
	for _, s := range v.Subscriptions {
		for p, e := range before[s.Name] {
			if got := s.Partitions[p]; got.Epoch <= e {
				t.Errorf("%s partition %d was h3's at epoch %d, now %+v", s.Name, p, e, got)
			}
		}
	}

	// NATS down: the answer says so rather than showing a stale view.
	n.Shutdown()
	r := serveWith(hosts[0].api, req{method: "GET", path: "/v1/cluster"}, func(hr *http.Request) {
		ctx, cancel := context.WithTimeout(hr.Context(), time.Second)
		t.Cleanup(cancel)
		*hr = *hr.WithContext(ctx)
	})
	checkResponse(t, hosts[0].api, "GET", "/v1/cluster", r)
	if p := problemOf(t, r, http.StatusServiceUnavailable); p.Type != "https://berth.dev/problems/cluster-unavailable" ||
		!strings.Contains(p.Detail, "NATS JetStream") || !strings.Contains(p.Detail, "store.jetstream.urls") {
		t.Errorf("problem %+v", p)
	}
	n.Restart() // so that the hosts leave at once when the test ends
}

// TestReadyzWhileLeaseLapsed: a host whose NATS goes away answers /readyz
// 503 lease-lapsed, and berth_cluster_lease_valid 0, once its lease may have
// run out — it calls no handler then — and is ready again by itself once
// NATS is back and it rejoined.
func TestReadyzWhileLeaseLapsed(t *testing.T) {
	n := natstest.RunServer(t)
	h := startClusterHost(t, n.URL(), "h1", clustertest.Ledger(t), []string{"mailer"})
	ready := func(want int) func() error {
		return func() error {
			if r := serve(h.api, req{method: "GET", path: "/readyz"}); r.status != want {
				return fmt.Errorf("GET /readyz: %s, want %d", r, want)
			}
			return nil
		}
	}
	checkfor.Nil(t, 10*time.Second, 20*time.Millisecond, ready(http.StatusOK))
	n.Shutdown()
	checkfor.Nil(t, clustertest.LeaseTTL, 20*time.Millisecond, ready(http.StatusServiceUnavailable))
	if r := serve(h.api, req{method: "GET", path: "/readyz"}); !strings.Contains(string(r.body), "lease-lapsed") {
		t.Fatalf("GET /readyz: %s", r)
	}
	if r := serve(h.api, req{method: "GET", path: "/metrics"}); !strings.Contains(string(r.body), "berth_cluster_lease_valid 0") {
		t.Fatalf("metrics without berth_cluster_lease_valid 0:\n%s", r.body)
	}
	n.Restart()
	checkfor.Nil(t, 20*time.Second, 50*time.Millisecond, ready(http.StatusOK))
}
