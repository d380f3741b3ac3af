package tests

// The three-host test's parts (cluster_test.go): reading /v1/cluster, the
// load, reading the log back and checking what the reactor was told.

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/natstest"
	"github.com/berthhq/berth/wasm/abi"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// clusterView is the part of GET /v1/cluster the tests read.
type clusterView struct {
	Mode  string `json:"mode"`
	Hosts []struct {
		ID string `json:"id"`
	} `json:"hosts"`
	Subscriptions []struct {
		Name       string `json:"name"`
		Partitions []struct {
			Index int    `json:"index"`
			State string `json:"state"`
			Owner string `json:"owner"`
		} `json:"partitions"`
	} `json:"subscriptions"`
}

// owners returns, per subscription, the owner of each partition as h sees
// them ("" for one no live host owns); nil when h does not answer.
func (h *hostProc) owners() map[string][]string {
	r := h.request("GET", "/v1/cluster", nil)
	var v clusterView
	if r.Status != 200 || json.Unmarshal(r.Body, &v) != nil {
		return nil
	}
	out := map[string][]string{}
	for _, s := range v.Subscriptions {
		o := make([]string, len(s.Partitions))
		for i, p := range s.Partitions {
			if p.State == "owned" {
				o[i] = p.Owner
			}
		}
		out[s.Name] = o
	}
	return out
}

// ownedBy reports whether every partition of each of subs is owned, each by
// one of hosts, and each host owns some.
// allOwnedBy says which host sees subs owned otherwise until each of
// hosts sees every partition of subs owned, and only by owners; nil then.
func allOwnedBy(hosts []*hostProc, subs []string, owners ...string) error {
	for i, h := range hosts {
		if v := h.owners(); !ownedBy(v, subs, owners...) {
			return fmt.Errorf("host %d (%s) sees the owners %v, want %v", i, h.URL, v, owners)
		}
	}
	return nil
}

func ownedBy(view map[string][]string, subs []string, hosts ...string) bool {
	for _, s := range subs {
		ps, ok := view[s]
		if !ok || len(ps) == 0 {
			return false
		}
		seen := map[string]bool{}
		for _, o := range ps {
			if !slices.Contains(hosts, o) {
				return false
			}
			seen[o] = true
		}
		if len(seen) != len(hosts) {
			return false
		}
	}
	return true
}

// acked is one append the host acknowledged.
type acked struct {
	id      string
	version uint64
	n       int64 // the unique number in its data
}

// clusterLoad appends to aggregates through whichever host answers, until
// stopped: each aggregate alternates OrderPlaced and OrderShipped, each event
// carrying a unique number, and every acknowledged append is recorded.
type clusterLoad struct {
	hosts   []*hostProc
	dead    []atomic.Bool
	seq     atomic.Int64
	stop    chan struct{}
	once    sync.Once // closes stop
	wg      sync.WaitGroup
	mu      sync.Mutex
	acks    []acked
	retries atomic.Int64 // appends sent again after a host did not answer
	// refused are the answers other than 201 and 503 with Retry-After: a
	// host that answers must store the append or say "try again", never
	// fail it for a NATS blip (a 500).
	refused []string
}

// startLoad starts workers appenders on hosts, worker w on the aggregates
// ids[w]; the load stops at the test's end if not before.
func startLoad(t testing.TB, hosts []*hostProc, workers int, ids [][]string, buyer func(id string) string) *clusterLoad {
	l := &clusterLoad{hosts: hosts, dead: make([]atomic.Bool, len(hosts)), stop: make(chan struct{})}
	l.run(workers, ids, buyer)
	t.Cleanup(l.halt)
	return l
}

// halt stops the load and waits for its appenders; it may be called again.
func (l *clusterLoad) halt() {
	l.once.Do(func() {
		close(l.stop)
		l.wg.Wait()
	})
}

// ackCount is how many appends were acknowledged so far.
func (l *clusterLoad) ackCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acks)
}

// acked says how many appends were acknowledged until n were; nil then.
func (l *clusterLoad) acked(n int) error {
	if got := l.ackCount(); got < n {
		return fmt.Errorf("%d appends acknowledged (%d sent again), want %d", got, l.retries.Load(), n)
	}
	return nil
}

func (l *clusterLoad) run(workers int, ids [][]string, buyer func(id string) string) {
	for w := range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			next := w
			for k := 0; ; k++ {
				select {
				case <-l.stop:
					return
				case <-time.After(15 * time.Millisecond): // a steady load, not a flood, on two cores
				}
				id := ids[w][k%len(ids[w])]
				typ := "OrderPlaced"
				if (k/len(ids[w]))%2 == 1 {
					typ = "OrderShipped"
				}
				n := l.seq.Add(1)
				body := map[string]any{"aggregateType": "Order", "aggregateId": id, "ownerId": buyer(id),
					"events": []map[string]any{{"type": typ, "data": map[string]int64{"total": 100 + n%7, "n": n}}}}
				for {
					h := l.hosts[next%len(l.hosts)]
					next++
					if l.dead[(next-1)%len(l.hosts)].Load() {
						continue
					}
					r, err := h.try("POST", "/v1/events", body)
					if err == nil && r.Status == 201 {
						var res struct {
							Version uint64 `json:"version"`
						}
						if json.Unmarshal(r.Body, &res) == nil {
							l.mu.Lock()
							l.acks = append(l.acks, acked{id: id, version: res.Version, n: n})
							l.mu.Unlock()
						}
						break
					}
					if err == nil && (r.Status != 503 || r.Header.Get("Retry-After") == "") {
						l.mu.Lock()
						l.refused = append(l.refused, fmt.Sprintf("%d %s", r.Status, r.Body))
						l.mu.Unlock()
					}
					// Not acknowledged (a host killed, a NATS node gone): it may
					// or may not be in the log; send it on to another host.
					l.retries.Add(1)
					select {
					case <-l.stop:
						return
					case <-time.After(50 * time.Millisecond):
					}
				}
			}
		}()
	}
}

// streamLeader returns the server name of the node leading stream.
func streamLeader(t *testing.T, nc *natstest.Cluster, stream string) string {
	t.Helper()
	conn, err := nats.Connect(nc.URLs())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	js, err := jetstream.New(conn)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(t.Context(), stream)
	if err != nil {
		t.Fatal(err)
	}
	info := s.CachedInfo()
	if info.Cluster == nil || info.Cluster.Leader == "" {
		t.Fatalf("stream %s has no leader: %+v", stream, info.Cluster)
	}
	return info.Cluster.Leader
}

// clusterEvent is one event of the load as the log holds it.
type clusterEvent struct {
	Type  string
	N     int64
	Total int64
}

// readAggregate reads every commit of Order id (one event each) from h.
func readAggregate(t *testing.T, h *hostProc, id string) []clusterEvent {
	t.Helper()
	var out []clusterEvent
	for from := 1; ; {
		var page struct {
			Commits []struct {
				Version uint64 `json:"version"`
				Events  []struct {
					Type string `json:"type"`
					Data struct {
						N     int64 `json:"n"`
						Total int64 `json:"total"`
					} `json:"data"`
				} `json:"events"`
			} `json:"commits"`
		}
		h.must(200, "GET", fmt.Sprintf("/v1/aggregates/Order/%s/events?from=%d&limit=1000", id, from), nil).JSON(t, &page)
		for _, c := range page.Commits {
			if int(c.Version) != len(out)+1 || len(c.Events) != 1 {
				t.Fatalf("%s: commit at version %d with %d events after %d", id, c.Version, len(c.Events), len(out))
			}
			e := c.Events[0]
			out = append(out, clusterEvent{Type: e.Type, N: e.Data.N, Total: e.Data.Total})
		}
		if len(page.Commits) < 1000 {
			return out
		}
		from += len(page.Commits)
	}
}

// foldSummaries is the order-summary projection's read model folded from
// logs by hand: per buyer, its orders, their total and its shipments.
func foldSummaries(logs map[string][]clusterEvent, buyer func(id string) string) map[string]buyerSummary {
	want := map[string]buyerSummary{}
	for id, evs := range logs {
		for _, e := range evs {
			s := want[buyer(id)]
			if e.Type == "OrderPlaced" {
				s.Orders++
				s.Total += e.Total
			} else {
				s.Shipped++
			}
			want[buyer(id)] = s
		}
	}
	return want
}

// shippedVersions returns the versions of the OrderShipped events of each
// aggregate of logs.
func shippedVersions(logs map[string][]clusterEvent) map[string][]uint64 {
	out := map[string][]uint64{}
	for id, evs := range logs {
		for i, e := range evs {
			if e.Type == "OrderShipped" {
				out[id] = append(out[id], uint64(i+1))
			}
		}
	}
	return out
}

// notifiedOrders counts the load's OrderShipped events the service was
// notified of (once or more).
func notifiedOrders(t *testing.T, svc *notifier, logs map[string][]clusterEvent) int {
	seen := map[string]bool{}
	for _, c := range svc.callsOf("") {
		k, err := abi.ParseInvocationKey(c.Key)
		if err != nil || c.Status >= 300 {
			continue
		}
		if _, ok := logs[k.AggregateID]; ok {
			seen[fmt.Sprintf("%s@%d", k.AggregateID, k.Version)] = true
		}
	}
	return len(seen)
}

// missingNotifications lists the first OrderShipped events (id@version) the
// service was not notified of.
func missingNotifications(svc *notifier, logs map[string][]clusterEvent) []string {
	seen := map[string]bool{}
	for _, c := range svc.callsOf("") {
		if k, err := abi.ParseInvocationKey(c.Key); err == nil && c.Status < 300 {
			seen[fmt.Sprintf("%s@%d", k.AggregateID, k.Version)] = true
		}
	}
	var out []string
	for id, vs := range shippedVersions(logs) {
		for _, v := range vs {
			if k := fmt.Sprintf("%s@%d", id, v); !seen[k] {
				out = append(out, k)
			}
		}
	}
	slices.Sort(out)
	return out[:min(len(out), 20)]
}

// checkNotifiedInOrder checks that, for each aggregate, the first call of
// each OrderShipped came after the first call of the one before it: a
// handover may deliver an event again, never one before the last.
func checkNotifiedInOrder(t *testing.T, svc *notifier, logs map[string][]clusterEvent) {
	t.Helper()
	first := map[string]map[uint64]int{} // aggregate → version → index of its first call
	calls := svc.callsOf("")
	again := 0
	for i, c := range calls {
		k, err := abi.ParseInvocationKey(c.Key)
		if err != nil {
			t.Fatalf("call %d: invocation key %q: %v", i, c.Key, err)
		}
		if _, ok := logs[k.AggregateID]; !ok {
			continue
		}
		m := first[k.AggregateID]
		if m == nil {
			m = map[uint64]int{}
			first[k.AggregateID] = m
		}
		if _, ok := m[k.Version]; ok {
			again++
			continue
		}
		m[k.Version] = i
	}
	for id, vs := range shippedVersions(logs) {
		for j := 1; j < len(vs); j++ {
			a, aok := first[id][vs[j-1]]
			b, bok := first[id][vs[j]]
			if !aok || !bok {
				t.Errorf("%s: version %d or %d never notified", id, vs[j-1], vs[j])
				continue
			}
			if b < a {
				t.Errorf("%s: version %d notified before version %d", id, vs[j], vs[j-1])
			}
		}
	}
	t.Logf("%d calls to the service, %d of them again for an event already notified (handover)", len(calls), again)
}
