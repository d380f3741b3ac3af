package tests

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/internal/testing/natstest"
)

// clusterLeaseTTL is the lease TTL of the three-host test: short, so that
// the test's waits for a handover are short, and long enough that a NATS
// node's loss (a leader election of the membership bucket, a few seconds at
// most here) does not cost a host its lease.
const clusterLeaseTTL = 6 * time.Second

// clusterConfig is the TOML of host i of a deployment on the NATS cluster
// at urls, with replicas of 3.
func clusterConfig(urls string, i int) string {
	var q []string
	for _, u := range strings.Split(urls, ",") {
		q = append(q, fmt.Sprintf("%q", u))
	}
	return fmt.Sprintf(`
[store]
backend = "jetstream"

[store.jetstream]
urls = [%s]
stream = "TRIO"
subject-prefix = "e2e.trio"
replicas = 3

[cluster]
host-id = "host-%d"
lease-ttl = %q
`, strings.Join(q, ", "), i, clusterLeaseTTL.String())
}

// TestThreeHostsSurviveAHostAndANode is issue 12's deployment: three built
// hosts on a three-node NATS cluster (every stream and bucket with three
// replicas) share a projection and a reactor over 36 aggregates under a
// steady load. One host is SIGKILLed, then a NATS node is shut down. Then:
// no acknowledged event is missing from the log, no parked record is lost,
// the killed host's partitions are owned again by the others within twice
// the lease TTL, the reactor saw each aggregate's events in order and every
// one of them, the projection's read model is the fold of the log, and the
// parked orders are resumed through whichever host is asked.
func TestThreeHostsSurviveAHostAndANode(t *testing.T) {
	nc := natstest.RunCluster(t, 3)
	svc := newNotifier(t)
	svc.set("buyer-404", behaviour{Unknown: true})
	summary, err := orderSummaryWasm()
	if err != nil {
		t.Fatal(err)
	}
	hosts := make([]*hostProc, 3)
	for i := range hosts {
		hosts[i] = newHost(t, hostConfig{NotifyURL: svc.URL(), Extra: clusterConfig(nc.URLs(), i) + fastRetry})
	}
	subs := []string{summarySub, subName}
	hosts[0].must(201, "PUT", "/v1/modules/order-summary", summary, "Content-Type", "application/wasm")
	hosts[1].must(201, "PUT", "/v1/modules/"+moduleName, notifierWasm, "Content-Type", "application/wasm")
	all := []string{"host-0", "host-1", "host-2"}
	checkfor.Within(t, 30*time.Second, func() error { return allOwnedBy(hosts, subs, all...) })

	// Five orders park for good: the service does not know their buyer.
	for i := range 5 {
		hosts[i%3].appendOrder(t, fmt.Sprintf("lost-%d", i), "buyer-404", "OrderShipped", 0)
	}
	parkedIDs := func(h *hostProc) []string {
		r := h.request("GET", "/v1/parked?subscription="+url.QueryEscape(subName), nil)
		var list struct {
			Records []struct {
				AggregateID string `json:"aggregateId"`
			} `json:"records"`
		}
		if r.Status != 200 || json.Unmarshal(r.Body, &list) != nil {
			return nil
		}
		var ids []string
		for _, p := range list.Records {
			ids = append(ids, p.AggregateID)
		}
		slices.Sort(ids)
		return ids
	}
	wantParked := []string{"lost-0", "lost-1", "lost-2", "lost-3", "lost-4"}
	checkfor.Within(t, 30*time.Second, func() error {
		if got := parkedIDs(hosts[2]); !slices.Equal(got, wantParked) {
			return fmt.Errorf("parked %v, want %v", got, wantParked)
		}
		return nil
	})

	// The load: 36 aggregates over six buyers, six appenders.
	ids := make([][]string, 6)
	for i := range 36 {
		ids[i%6] = append(ids[i%6], fmt.Sprintf("o-%02d", i))
	}
	buyer := func(id string) string { return "buyer-" + id[len(id)-1:] }
	load := startLoad(t, hosts, 6, ids, buyer)
	checkfor.Within(t, 60*time.Second, func() error { return load.acked(300) })

	// SIGKILL host-1 under load: the others own its partitions within 2x TTL.
	load.dead[1].Store(true)
	killed := time.Now()
	hosts[1].Kill()
	checkfor.Within(t, 2*clusterLeaseTTL+5*time.Second, func() error {
		return allOwnedBy([]*hostProc{hosts[0], hosts[2]}, subs, "host-0", "host-2")
	})
	handover := time.Since(killed)
	t.Logf("partitions owned again %v after the SIGKILL (lease TTL %v)", handover.Round(time.Millisecond), clusterLeaseTTL)
	if handover > 2*clusterLeaseTTL {
		t.Errorf("the killed host's partitions were owned again after %v, more than 2x the lease TTL %v", handover, clusterLeaseTTL)
	}
	before := load.ackCount()
	checkfor.Within(t, 60*time.Second, func() error { return load.acked(before + 200) })

	// A NATS node goes — the one that leads the ledger's stream, the worst
	// to lose: nothing changes but latency.
	owned := hosts[2].owners()
	leader := streamLeader(t, nc, "TRIO_LEDGER")
	for _, n := range nc.Nodes {
		if n.Name() == leader {
			n.Shutdown()
		}
	}
	before = load.ackCount()
	checkfor.Within(t, 60*time.Second, func() error { return load.acked(before + 200) })
	if v := hosts[2].owners(); !maps.EqualFunc(v, owned, slices.Equal) {
		t.Errorf("ownership changed when a NATS node went: %v, was %v", v, owned)
	}
	load.halt()
	t.Logf("%d appends acknowledged, %d sent again after a failed answer", load.ackCount(), load.retries.Load())
	if len(load.refused) > 0 {
		t.Errorf("appends answered neither 201 nor 503 with Retry-After (%d): %q", len(load.refused), load.refused)
	}

	// The log: every acknowledged append is in it, at the version acknowledged.
	var flat []string
	for _, g := range ids {
		flat = append(flat, g...)
	}
	logs := map[string][]clusterEvent{}
	for _, id := range flat {
		logs[id] = readAggregate(t, hosts[0], id)
	}
	for _, a := range load.acks {
		evs := logs[a.id]
		if a.version == 0 || int(a.version) > len(evs) || evs[a.version-1].N != a.n {
			t.Fatalf("acknowledged append %d of %s at version %d is not in the log (%d commits)", a.n, a.id, a.version, len(evs))
		}
	}

	// The projection is the fold of the log, on every host still running.
	want := foldSummaries(logs, buyer)
	want["buyer-404"] = buyerSummary{Shipped: 5}
	hosts[0].waitSummaries(t, want)
	hosts[2].waitSummaries(t, want)

	// The reactor: every OrderShipped notified, each aggregate's in order.
	shipped := 0
	for _, evs := range logs {
		for _, e := range evs {
			if e.Type == "OrderShipped" {
				shipped++
			}
		}
	}
	// The checks of the last second also ask the hosts what they see, so
	// that a failure says it.
	lastSecond := time.Now().Add(59 * time.Second)
	checkfor.Nil(t, 60*time.Second, 25*time.Millisecond, func() error {
		n := notifiedOrders(t, svc, logs)
		if n == shipped {
			return nil
		}
		err := fmt.Errorf("%d of %d OrderShipped notified (%d calls); not: %v", n, shipped, len(svc.callsOf("")), missingNotifications(svc, logs))
		if time.Now().After(lastSecond) {
			err = fmt.Errorf("%w; parked: %v", err, parkedIDs(hosts[0]))
			for _, h := range []*hostProc{hosts[0], hosts[2]} {
				err = fmt.Errorf("%w\n%s: %s", err, h.URL, h.request("GET", "/v1/subscriptions/"+subName, nil).Body)
			}
		}
		return err
	})
	checkNotifiedInOrder(t, svc, logs)

	// No parked record was lost.
	if got := parkedIDs(hosts[0]); !slices.Equal(got, wantParked) {
		t.Errorf("parked after the kills: %v, want %v", got, wantParked)
	}

	// Operator calls on any host act where they must: the buyer is known
	// now, and each parked order is resumed through host-0 or host-2
	// alternately, whichever owns its partition; each answers as one host
	// would, and every order is notified and leaves the ledger.
	svc.set("buyer-404", behaviour{})
	for i, id := range wantParked {
		hosts[[]int{0, 2}[i%2]].must(202, "POST", parkedPath(id)+"/resume", map[string]string{"reason": "buyer imported"})
	}
	hosts[2].must(404, "POST", parkedPath("lost-0")+"/resume", map[string]string{"reason": "again"})
	for _, id := range wantParked {
		svc.waitNotified(t, key(id, 1), 30*time.Second)
	}
	checkfor.Within(t, 30*time.Second, func() error {
		if got := parkedIDs(hosts[0]); len(got) != 0 {
			return fmt.Errorf("%v still parked after the resume", got)
		}
		return nil
	})
}
