package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/api/wire"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/internal/testing/natstest"
)

// newClusterHost starts the API over a host on store.backend "jetstream"
// at urls (replicas copies of each stream), whose requests may take
// writeTimeout (server.write-timeout).
func newClusterHost(t *testing.T, urls []string, replicas int, writeTimeout string) *testHost {
	t.Helper()
	h := &testHost{t: t, buyers: &buyers{}}
	svc := httptest.NewServer(h.buyers)
	t.Cleanup(svc.Close)
	dir := t.TempDir()
	quoted := make([]string, len(urls))
	for i, u := range urls {
		quoted[i] = fmt.Sprintf("%q", u)
	}
	text := fmt.Sprintf(`
[server]
data-dir = %q
write-timeout = %q

[store]
backend = "jetstream"

[store.jetstream]
urls = [%s]
replicas = %d

[cluster]
host-id = "h1"
lease-ttl = "3s"

[modules.shipment-notifier]
allowed-hosts = [%q]
config = { notifications-url = %q }
`, dir, writeTimeout, strings.Join(quoted, ", "), replicas, strings.TrimPrefix(svc.URL, "http://"), svc.URL)
	h.start(dir, text)
	return h
}

// leaderOf returns the node of c leading stream, once it has one.
func leaderOf(t *testing.T, c *natstest.Cluster, stream string) *natstest.Node {
	t.Helper()
	var leader *natstest.Node
	checkfor.Nil(t, 30*time.Second, 10*time.Millisecond, func() error {
		for _, n := range c.Nodes {
			if n.Server() != nil && n.Server().JetStreamIsStreamLeader("$G", stream) {
				leader = n
			}
		}
		if leader == nil {
			return fmt.Errorf("no node of %d leads stream %s", len(c.Nodes), stream)
		}
		return nil
	})
	return leader
}

// atLeast says, until want appends have been answered 201 (count tells
// how many answers had a status), how many have and how many were not.
func atLeast(count func(status int) int, want int, what string) error {
	if got := count(http.StatusCreated); got < want {
		return fmt.Errorf("%s: %d appends answered 201 (%d with 503), want %d", what, got, count(http.StatusServiceUnavailable), want)
	}
	return nil
}

// checkUnavailable fails the test unless r is the 503 of NATS not
// answering: Retry-After and a problem naming NATS.
func checkUnavailable(t *testing.T, what string, r response) {
	t.Helper()
	if r.status != http.StatusServiceUnavailable {
		t.Errorf("%s: %s, want 503", what, r)
		return
	}
	if r.header.Get("Retry-After") == "" {
		t.Errorf("%s: 503 without Retry-After: %v", what, r.header)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("%s: Content-Type %q", what, ct)
	}
	var p Problem
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Errorf("%s: body %q: %v", what, r.body, err)
		return
	}
	if p.Type != "https://berth.dev/problems/nats-unavailable" || !strings.Contains(p.Detail, "NATS") {
		t.Errorf("%s: problem %+v, want nats-unavailable naming NATS", what, p)
	}
}

// TestAppendsThroughAStreamLeaderElection: clients append while the event
// log stream's leader node is shut down, forcing an election, and while it
// comes back. Every append is asked again through the election within the
// request's time and answers 201 — a 503 (with Retry-After) only past it,
// never a 500 — and every 201's commit is in the log exactly once, at the
// position it was given.
func TestAppendsThroughAStreamLeaderElection(t *testing.T) {
	c := natstest.RunCluster(t, 3)
	urls := strings.Split(c.URLs(), ",")
	h := newClusterHost(t, urls, 3, "20s")
	if r := h.do(req{method: "POST", path: "/v1/events", body: `{"aggregateType":"order","aggregateId":"warm","events":[{"type":"Placed"}]}`}); r.status != 201 {
		t.Fatalf("first append: %s", r)
	}

	type answer struct {
		client, n int
		status    int
		result    wire.AppendResult
	}
	const clients = 4
	var (
		mu      sync.Mutex
		answers []answer
		stop    = make(chan struct{})
		wg      sync.WaitGroup
	)
	for cl := range clients {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				body := fmt.Sprintf(`{"aggregateType":"order","aggregateId":"o-%d","events":[{"type":"Placed","data":{"client":%d,"n":%d}}]}`, cl, cl, n)
				r := h.do(req{method: "POST", path: "/v1/events", body: body})
				a := answer{client: cl, n: n, status: r.status}
				switch r.status {
				case http.StatusCreated:
					r.json(t, &a.result)
				case http.StatusServiceUnavailable:
					// The shape of any 503 is checked; but an election is
					// far shorter than the request's time (18s), within
					// which the host asks again: none is expected.
					checkUnavailable(t, "append during the election", r)
					t.Errorf("append %d of client %d: 503 %s, want it asked again through the election and stored", n, cl, r.body)
				default:
					t.Errorf("append %d of client %d: %s, want 201 (or a 503, never a 500)", n, cl, r)
				}
				mu.Lock()
				answers = append(answers, a)
				mu.Unlock()
			}
		})
	}
	count := func(status int) int {
		mu.Lock()
		defer mu.Unlock()
		k := 0
		for _, a := range answers {
			if a.status == status {
				k++
			}
		}
		return k
	}
	checkfor.Nil(t, 30*time.Second, 10*time.Millisecond, func() error { return atLeast(count, 20, "appends under way") })
	leader := leaderOf(t, c, "BERTH_EVENTS")
	leader.Shutdown()
	before := count(201)
	checkfor.Nil(t, 60*time.Second, 10*time.Millisecond, func() error {
		return atLeast(count, before+20, "appends answered after the leader's node went down")
	})
	leader.Restart()
	before = count(201)
	checkfor.Nil(t, 60*time.Second, 10*time.Millisecond, func() error {
		return atLeast(count, before+20, "appends answered after the node came back")
	})
	close(stop)
	wg.Wait()

	// Every 201 is in the log once, at its position; nothing is there twice.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	head, err := h.events.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	commits, err := h.events.Read(ctx, 1, int(head))
	if err != nil {
		t.Fatal(err)
	}
	type key struct{ client, n int }
	stored := map[key][]uint64{}
	for _, cm := range commits {
		if cm.AggregateID == "warm" {
			continue
		}
		var d struct{ Client, N int }
		if err := json.Unmarshal(bytes.TrimSpace(cm.Events[0].Payload), &d); err != nil {
			t.Fatalf("commit at %d: %v", cm.Position, err)
		}
		stored[key{d.Client, d.N}] = append(stored[key{d.Client, d.N}], cm.Position)
	}
	for k, ps := range stored {
		if len(ps) > 1 {
			t.Errorf("append %d of client %d stored %d times, at %v", k.n, k.client, len(ps), ps)
		}
	}
	unavailable := 0
	for _, a := range answers {
		switch a.status {
		case http.StatusCreated:
			ps := stored[key{a.client, a.n}]
			if len(ps) != 1 || ps[0] != a.result.Position {
				t.Errorf("append %d of client %d answered 201 at position %d; the log has it at %v", a.n, a.client, a.result.Position, ps)
			}
		case http.StatusServiceUnavailable:
			unavailable++
		}
	}
	t.Logf("%d appends: %d answered 201, %d answered 503; %d commits in the log", len(answers), count(201), unavailable, len(commits)-1)
}

// TestWritesWithNATSDownAnswer503: with every NATS node down for longer
// than the request's time, each write that goes to JetStream — an append, a
// module's upload, rollback and removal, a pause and a job (the ledger's) —
// is asked again until the request's time runs out, then answered 503 with
// Retry-After and a problem naming NATS: not 500, and not after a hang.
func TestWritesWithNATSDownAnswer503(t *testing.T) {
	c := natstest.RunCluster(t, 3)
	h := newClusterHost(t, strings.Split(c.URLs(), ","), 3, "3s")
	notifier(t) // built before the clock starts
	// Deployed with more time than a request here has: a first upload
	// to a fresh cluster may take longer.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, _, err := h.modules.Put(ctx, "shipment-notifier", notifier(t)); err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Nodes {
		n.Shutdown()
	}
	start := time.Now()
	r := h.do(req{method: "POST", path: "/v1/events", body: `{"aggregateType":"order","aggregateId":"o-1","events":[{"type":"Placed"}]}`})
	took := time.Since(start)
	checkUnavailable(t, "append with NATS down", r)
	// The request's time is 2.7s (write-timeout less a tenth): asked again
	// until then, answered before write-timeout.
	if took < 2*time.Second || took > 3*time.Second {
		t.Errorf("append with NATS down answered after %v, want within the request's time (2.7s)", took)
	}
	// The module store's, the ledger's (pause, a job): the same.
	for _, w := range []struct {
		what string
		do   func() response
	}{
		{"upload", func() response { return h.upload("shipment-notifier", "") }},
		{"rollback", func() response {
			return h.do(req{method: "POST", path: "/v1/modules/shipment-notifier/rollback", body: `{"version":1}`})
		}},
		{"removal", func() response { return h.do(req{method: "DELETE", path: "/v1/modules/shipment-notifier"}) }},
		{"pause", func() response {
			return h.do(req{method: "POST", path: "/v1/subscriptions/" + notifierSub + "/pause", body: `{"reason":"outage"}`})
		}},
		{"job", func() response {
			return h.do(req{method: "POST", path: "/v1/jobs", body: `{"action":"resume","reason":"outage"}`})
		}},
	} {
		start = time.Now()
		r = w.do()
		took = time.Since(start)
		checkUnavailable(t, w.what+" with NATS down", r)
		if took > 3*time.Second {
			t.Errorf("%s with NATS down answered after %v, want within write-timeout (3s)", w.what, took)
		}
	}
	for _, n := range c.Nodes {
		n.Restart()
	}
	c.WaitForMetaLeader(t)
}

// TestWritesWaitOutALostQuorum: two of the three NATS nodes go down for
// longer than one request to NATS may take (store.jetstream.connect-timeout,
// 5s), so that no stream can elect a leader, then one comes back. An append
// made meanwhile is asked again within the request's time and stored once
// the stream has a leader: 201, not a raw NATS timeout and not a 500.
func TestWritesWaitOutALostQuorum(t *testing.T) {
	c := natstest.RunCluster(t, 3)
	h := newClusterHost(t, strings.Split(c.URLs(), ","), 3, "40s")
	down := c.Nodes[1:]
	for _, n := range down {
		n.Shutdown()
	}
	var wg sync.WaitGroup
	var appended response
	wg.Go(func() {
		appended = h.do(req{method: "POST", path: "/v1/events", body: `{"aggregateType":"order","aggregateId":"o-1","events":[{"type":"Placed"}]}`})
	})
	// The outage outlasts a request to NATS (5s): the writes must ask
	// again to be stored.
	time.Sleep(7 * time.Second)
	down[0].Restart()
	wg.Wait()
	if appended.status != http.StatusCreated {
		t.Errorf("append during the lost quorum: %s, want 201", appended)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if cs, err := h.events.ReadAggregate(ctx, "order", "o-1", 0, 0); err != nil || len(cs) != 1 {
		t.Errorf("the aggregate after the outage: %d commits, %v; want 1", len(cs), err)
	}
	down[1].Restart()
}

// TestUploadThroughAModuleStoreLeaderElection: a module uploaded while the
// module store's leader node is down is stored once NATS has elected
// another — the upload asks again within the request's time rather than
// answer a raw NATS timeout.
func TestUploadThroughAModuleStoreLeaderElection(t *testing.T) {
	c := natstest.RunCluster(t, 3)
	h := newClusterHost(t, strings.Split(c.URLs(), ","), 3, "30s")
	leader := leaderOf(t, c, "OBJ_BERTH_EVENTS_MODULES")
	leader.Shutdown()
	r := h.upload("shipment-notifier", "")
	if r.status != http.StatusCreated {
		t.Fatalf("upload during the module store's election: %s, want 201", r)
	}
	var info wire.ModuleInfo
	r.json(t, &info)
	if info.Version != 1 {
		t.Errorf("uploaded as version %d, want 1", info.Version)
	}
	leader.Restart()
}
