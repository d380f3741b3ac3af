package tests

import (
	"fmt"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/berthhq/berth/cluster"
	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/internal/testing/netns"
)

// The network-fault harness (issue 31): three built hosts on a three-node
// NATS cluster of nats-server processes, each process in a network
// namespace of its own on one bridge (internal/testing/netns); the test
// cuts and heals the links between them with packet filters inside the
// namespaces — silent drops, as a pulled cable or a firewall's DROP — or
// makes them lossy. The test itself reaches every host's REST API all along
// (from the root namespace), and each host calls a service of its own on
// the bridge (a notifier per host), so every call says which host made it;
// every claim of a partition is in the hosts' logs with its time, so each
// call can be set against who owned its partition when it arrived.

// faultLeaseTTL is the harness's lease TTL: 12 s; below it every host
// drops its partitions whenever the membership bucket's leader is lost
// (docs/failure-model.md). A heal's time is partly the
// NATS cluster's: a node that rejoins after a split makes the majority's
// Raft groups step down and elect again (up to 9 s in nats-server 2.15),
// and at 6 s that cost the majority's hosts their terms too, and the
// heal 12.4 s, more than the bound of 2 TTLs (docs/BENCHMARKS.md).
const faultLeaseTTL = 12 * time.Second

// faultCluster is the harness's deployment.
type faultCluster struct {
	net    *netns.Net
	hostNS []*netns.NS // host i's namespace
	hosts  []*hostProc
	svcs   []*notifier // host i's service
	calls  *spans      // every service's calls, with their host
	nodes  []*natsProc
	ids    [][]string // the load's aggregates, and a backlog's
	buyer  func(string) string
}

func faultConfig(urls []string, i int, ttl time.Duration) string {
	var q []string
	for _, u := range urls {
		q = append(q, strconv.Quote(u))
	}
	return fmt.Sprintf(`
[store]
backend = "jetstream"

[store.jetstream]
urls = [%s]
stream = "FAULTS"
subject-prefix = "e2e.faults"
replicas = 3
connect-timeout = "2s"
ping-interval = "500ms"
max-pings-outstanding = 2

[cluster]
host-id = "host-%d"
lease-ttl = %q

[subscription]
concurrency = 1
`, strings.Join(q, ", "), i, ttl.String())
}

// startFaultCluster starts the deployment with the reactor deployed and
// every partition owned, and a steady load through every host; it skips
// the test where network namespaces cannot be made.
func startFaultCluster(t *testing.T) (*faultCluster, *clusterLoad) {
	t.Helper()
	return startFaultClusterTTL(t, faultLeaseTTL)
}

// startFaultClusterTTL is startFaultCluster with a lease TTL of ttl.
func startFaultClusterTTL(t testing.TB, ttl time.Duration) (*faultCluster, *clusterLoad) {
	t.Helper()
	n := netns.New(t)
	fc := &faultCluster{net: n, calls: &spans{}, buyer: func(id string) string { return "buyer-" + id[len(id)-1:] }}
	var nodeNS []*netns.NS
	for i := range 3 {
		nodeNS = append(nodeNS, n.Add(fmt.Sprint("n", i)))
	}
	fc.nodes = startNATSCluster(t, nodeNS)
	var urls []string
	for _, node := range fc.nodes {
		urls = append(urls, node.URL())
	}
	for i := range 3 {
		s := n.Add(fmt.Sprint("h", i))
		fc.hostNS = append(fc.hostNS, s)
		svc := newNotifierAt(t, n.Gateway()+":0", i, fc.calls)
		fc.svcs = append(fc.svcs, svc)
		fc.slow(i, 20*time.Millisecond)
		fc.hosts = append(fc.hosts, startHostIn(t, s, hostConfig{NotifyURL: svc.URL(), Extra: faultConfig(urls, i, ttl) + fastRetry}))
	}
	// Before the hosts stop at the test's end: heal every link and wake
	// every host, whatever the test did.
	t.Cleanup(func() {
		for _, h := range fc.hosts {
			h.cmd.Process.Signal(syscall.SIGCONT)
		}
		n.HealAll()
	})
	summary, err := orderSummaryWasm()
	if err != nil {
		t.Fatal(err)
	}
	// Two subscriptions, as the trial had: the projection's sorts first.
	fc.hosts[0].must(201, "PUT", "/v1/modules/order-summary", summary, "Content-Type", "application/wasm")
	fc.hosts[0].must(201, "PUT", "/v1/modules/"+moduleName, notifierWasm, "Content-Type", "application/wasm")
	checkfor.Within(t, 30*time.Second, func() error { return allOwnedBy(fc.hosts, faultSubs, "host-0", "host-1", "host-2") })
	fc.ids = make([][]string, 4)
	for i := range 24 {
		fc.ids[i%4] = append(fc.ids[i%4], fmt.Sprintf("o-%02d", i))
	}
	load := startLoad(t, fc.hosts, 4, fc.ids, fc.buyer)
	checkfor.Within(t, 30*time.Second, func() error { return load.acked(120) })
	return fc, load
}

// faultSubs are the deployment's subscriptions: a projection's and a
// reactor's.
var faultSubs = []string{summarySub, subName}

// slow makes host i's service take d over each call arriving from now on.
func (fc *faultCluster) slow(i int, d time.Duration) {
	for b := range 6 {
		fc.svcs[i].set(fmt.Sprint("buyer-", b), behaviour{Delay: d})
	}
}

// backlog gives host i work queued when a fault strikes, as a busy host
// has: its service takes 300 ms over each call, and perPartition
// OrderShipped events are appended (through another host) to one
// aggregate of each partition of the reactor host i owns.
func (fc *faultCluster) backlog(t *testing.T, i, perPartition int) {
	t.Helper()
	owners := fc.hosts[i].owners()[subName]
	host := fmt.Sprint("host-", i)
	var ids []string
	for p, o := range owners {
		if o != host {
			continue
		}
		for k := 0; ; k++ {
			id := fmt.Sprintf("b-%d-%d", p, k)
			if eventlog.PartitionOf("Order", id, cluster.DefaultPartitions) == p {
				ids = append(ids, id)
				break
			}
		}
	}
	if len(ids) == 0 {
		t.Fatalf("%s owns no partition of %s: %v", host, subName, owners)
	}
	fc.ids = append(fc.ids, ids) // read back and checked with the load's
	fc.slow(i, 300*time.Millisecond)
	via := fc.hosts[(i+1)%len(fc.hosts)]
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() {
			for range perPartition {
				via.appendOrder(t, id, fc.buyer(id), "OrderShipped", 1)
			}
		})
	}
	wg.Wait()
	// The host has read them and works through them.
	checkfor.Within(t, 10*time.Second, func() error {
		for _, id := range ids {
			if slices.IndexFunc(fc.svcs[i].callsOf(""), func(c call) bool { return c.Order == id }) < 0 {
				return fmt.Errorf("no call for %s yet", id)
			}
		}
		return nil
	})
}

// natsNS are the NATS nodes' namespaces.
func (fc *faultCluster) natsNS() []*netns.NS {
	var out []*netns.NS
	for _, n := range fc.nodes {
		out = append(out, n.ns)
	}
	return out
}

// cut drops every packet between host i and every NATS node.
func (fc *faultCluster) cut(i int) { fc.net.Cut(fc.hostNS[i], fc.natsNS()...) }

func (fc *faultCluster) heal(i int) { fc.net.Heal(fc.hostNS[i], fc.natsNS()...) }

// claimEvent is a "cluster: claimed" line of a host's log.
type claimEvent struct {
	at        time.Time
	host      string
	partition int
	from      string
}

var claimedRE = regexp.MustCompile(`(?m)^time=(\S+) .*msg="cluster: claimed" .*subscription=(\S+) partition=(\d+) .*from=(\S*)`)

// claims returns the reactor's claims in the hosts' logs, by time.
func (fc *faultCluster) claims(t *testing.T) []claimEvent {
	t.Helper()
	var out []claimEvent
	for i, h := range fc.hosts {
		for _, m := range claimedRE.FindAllStringSubmatch(h.Stderr(), -1) {
			if strings.Trim(m[2], `"`) != subName {
				continue
			}
			at, err := time.Parse(time.RFC3339Nano, m[1])
			if err != nil {
				t.Fatalf("host-%d logged a claim at %q: %v", i, m[1], err)
			}
			p, _ := strconv.Atoi(m[3])
			out = append(out, claimEvent{at: at, host: fmt.Sprint("host-", i), partition: p, from: strings.Trim(m[4], `"`)})
		}
	}
	slices.SortStableFunc(out, func(a, b claimEvent) int { return a.at.Compare(b.at) })
	return out
}

// ownerAt returns the host whose claim of partition p came last at or
// before at ("" if none).
func ownerAt(claims []claimEvent, p int, at time.Time) (string, time.Time) {
	owner, since := "", time.Time{}
	for _, c := range claims {
		if c.at.After(at) {
			break
		}
		if c.partition == p {
			owner, since = c.host, c.at
		}
	}
	return owner, since
}

// strayCall is a call a host made for a partition another host had
// claimed since.
type strayCall struct {
	host  string
	call  call
	owner string
	since time.Time
}

func (s strayCall) String() string {
	return fmt.Sprintf("%s called for %s (key %s) at %s; %s had claimed its partition at %s",
		s.host, s.call.Order, s.call.Key, s.call.At.Format("15:04:05.000"), s.owner, s.since.Format("15:04:05.000"))
}

// strays returns every call (by its arrival at the host's service) made by
// a host for a partition whose last claim by then was another host's.
func (fc *faultCluster) strays(claims []claimEvent) []strayCall {
	var out []strayCall
	for i, svc := range fc.svcs {
		host := fmt.Sprint("host-", i)
		for _, c := range svc.callsOf("") {
			p := eventlog.PartitionOf("Order", c.Order, cluster.DefaultPartitions)
			if owner, since := ownerAt(claims, p, c.At); owner != host {
				out = append(out, strayCall{host: host, call: c, owner: owner, since: since})
			}
		}
	}
	return out
}

// lastCall returns the arrival of host i's last call at or before until.
func (fc *faultCluster) lastCall(i int, until time.Time) time.Time {
	var last time.Time
	for _, c := range fc.svcs[i].callsOf("") {
		if !c.At.After(until) && c.At.After(last) {
			last = c.At
		}
	}
	return last
}

// firstClaimFrom returns the first claim after since of a partition from
// host, by another host.
func firstClaimFrom(claims []claimEvent, host string, since time.Time) (claimEvent, bool) {
	for _, c := range claims {
		if c.at.After(since) && c.from == host && c.host != host {
			return c, true
		}
	}
	return claimEvent{}, false
}

// rejoin waits, once host i's fault ended at healAt, until it is ready
// again and the three hosts own every partition; then it lets the load run
// a little more. It returns how long the rejoin took.
func (fc *faultCluster) rejoin(t *testing.T, load *clusterLoad, i int, healAt time.Time) time.Duration {
	t.Helper()
	load.dead[i].Store(false)
	checkfor.Within(t, 30*time.Second, func() error {
		if got := fc.readyz(i); got != 200 {
			return fmt.Errorf("GET /readyz on host-%d after the fault: %d", i, got)
		}
		return allOwnedBy(fc.hosts, faultSubs, "host-0", "host-1", "host-2")
	})
	healed := time.Since(healAt)
	before := load.ackCount()
	checkfor.Within(t, 30*time.Second, func() error { return load.acked(before + 30) })
	return healed
}

func (fc *faultCluster) readyz(i int) int {
	r, err := fc.hosts[i].try("GET", "/readyz", nil)
	if err != nil {
		return 0
	}
	return r.Status
}
