package tests

// The network faults of issue 31, run on the netns harness
// (netfault_test.go), several in sequence on one deployment to keep CI
// short; after the last, what must hold after every fault is checked over
// the whole run (faultCluster.verify).

import (
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berthhq/berth/cluster"
	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/internal/testing/netns"
)

// TestNetworkFaultsCutIsolateSplitLoss: under load, one after another on
// one deployment — a host cut off from every NATS node; the NATS node a
// host is connected to cut off from the other two; a host and its node
// split off together; a host's links to NATS losing 40 % of their packets.
func TestNetworkFaultsCutIsolateSplitLoss(t *testing.T) {
	fc, load := startFaultCluster(t)
	t.Run("cut", func(t *testing.T) { fc.cutOff(t, load, 0) })
	t.Run("isolate", func(t *testing.T) { fc.isolateNodeOf(t, load, 1) })
	t.Run("split", func(t *testing.T) { fc.splitOff(t, load, 2) })
	t.Run("loss", func(t *testing.T) { fc.lossy(t, load, 1, 40, 12*time.Second) })
	fc.verify(t, load, nil)
}

// TestNetworkFaultsPauseFlap: under load, on one deployment — a host
// stopped (SIGSTOP) for 2 lease TTLs while its attempts run, then woken; a
// host's links to NATS cut for 2 s and back for 1 s, four times over.
func TestNetworkFaultsPauseFlap(t *testing.T) {
	fc, load := startFaultCluster(t)
	var woke time.Time
	t.Run("pause", func(t *testing.T) { woke = fc.pause(t, load, 2) })
	t.Run("flap", func(t *testing.T) { fc.flap(t, load, 0) })
	// The attempt each of the paused host's partitions was in may land
	// once after it woke — its request was under way when it stopped — and
	// the new owner makes it too, with the same invocation key.
	fc.verify(t, load, func(s []strayCall) error {
		perPartition := map[int]int{}
		for _, c := range s {
			if c.host != "host-2" || c.call.At.Before(woke) || !c.since.Before(woke) {
				return fmt.Errorf("%v", s)
			}
			p := eventlog.PartitionOf("Order", c.call.Order, cluster.DefaultPartitions)
			if perPartition[p]++; perPartition[p] > 1 {
				return fmt.Errorf("host-2 called twice after waking for partition %d, claimed by another host during the pause, want at most the one attempt under way: %v", p, s)
			}
			if !slices.ContainsFunc(merged(fc.svcs).callsOf(""), func(o call) bool { return o.Key == c.call.Key && o.At != c.call.At }) {
				return fmt.Errorf("%v: no other call with its invocation key", c)
			}
		}
		return nil
	})
	woken := 0
	for _, s := range fc.strays(fc.claims(t)) {
		if s.host == "host-2" && !s.call.At.Before(woke) {
			woken++
		}
	}
	t.Logf("figure: pause: %d calls of host-2 arrived after the SIGCONT for partitions claimed during the pause", woken)
}

// settled waits until every host is ready and every partition owned by
// the three, as before a fault: each fault of a run starts from a steady
// deployment, whatever the one before left going.
func (fc *faultCluster) settled(t testing.TB) {
	t.Helper()
	checkfor.Within(t, 60*time.Second, func() error {
		for i := range fc.hosts {
			if got := fc.readyz(i); got != 200 {
				return fmt.Errorf("GET /readyz on host-%d: %d", i, got)
			}
		}
		return allOwnedBy(fc.hosts, faultSubs, "host-0", "host-1", "host-2")
	})
}

// allTermsEnded is termsEnded of every host.
func (fc *faultCluster) allTermsEnded() []int {
	var out []int
	for i := range fc.hosts {
		out = append(out, fc.termsEnded(i))
	}
	return out
}

// termsEnded counts host i's "lease term ended" lines so far.
func (fc *faultCluster) termsEnded(i int) int {
	return strings.Count(fc.hosts[i].Stderr(), `msg="cluster: lease term ended; giving up partitions"`)
}

// others are the hosts but i, and their ids.
func (fc *faultCluster) others(i int) ([]*hostProc, []string) {
	var hs []*hostProc
	var ids []string
	for j, h := range fc.hosts {
		if j != i {
			hs, ids = append(hs, h), append(ids, fmt.Sprint("host-", j))
		}
	}
	return hs, ids
}

// stops waits until host i, whose fault struck at cutAt, says it may no
// longer act (/readyz 503), and its partitions are owned by the others;
// it checks that it said so before any other host claimed one of them,
// and returns how long after cutAt each came.
func (fc *faultCluster) stops(t *testing.T, i int, cutAt time.Time, ended int) (fenced, moved, claimed time.Duration) {
	t.Helper()
	checkfor.Within(t, 2*faultLeaseTTL, func() error {
		if got := fc.readyz(i); got != 503 {
			return fmt.Errorf("GET /readyz on host-%d: %d, want 503", i, got)
		}
		return nil
	})
	fenced = time.Since(cutAt)
	hs, ids := fc.others(i)
	// The majority may have to elect the membership bucket's leader first,
	// 4–9 s, if it was on the minority's side.
	checkfor.Within(t, 2*faultLeaseTTL+15*time.Second, func() error { return allOwnedBy(hs, faultSubs, ids...) })
	moved = time.Since(cutAt)
	host := fmt.Sprint("host-", i)
	first, ok := firstClaimFrom(fc.claims(t), host, cutAt)
	if !ok {
		t.Fatalf("no partition of %s claimed by another host after the fault", host)
	}
	claimed = first.at.Sub(cutAt)
	if fenced >= claimed {
		t.Errorf("%s said it stopped %v after the fault, after another host's claim %v after it", host, fenced, claimed)
	}
	if fc.termsEnded(i) == ended {
		t.Errorf("%s did not log that it stopped acting", host)
	}
	return fenced, moved, claimed
}

// healedWithin checks that every partition was owned again within 2 TTLs
// of the heal.
func healedWithin(t *testing.T, fault string, healed time.Duration) {
	t.Helper()
	if healed > 2*faultLeaseTTL {
		t.Errorf("%s: every partition owned by the three %v after the heal, more than 2x the lease TTL %v", fault, healed, faultLeaseTTL)
	}
}

// cutOff cuts host i off from every NATS node, and heals it once the
// others own its partitions.
func (fc *faultCluster) cutOff(t *testing.T, load *clusterLoad, i int) {
	fc.settled(t)
	ended := fc.termsEnded(i)
	load.dead[i].Store(true)
	cutAt := time.Now()
	fc.cut(i)
	fenced, moved, claimed := fc.stops(t, i, cutAt, ended)
	healAt := time.Now()
	fc.heal(i)
	healed := fc.rejoin(t, load, i, healAt)
	healedWithin(t, "cut", healed)
	t.Logf("figure: cut: host-%d fenced (readyz 503) %v after the cut; its last call %v after it; first claim of its partitions by another host %v after it (lease TTL %v); all owned by the others %v after it; all owned by the three %v after the heal",
		i, ms(fenced), ms(fc.lastCall(i, healAt).Sub(cutAt)), ms(claimed), faultLeaseTTL, ms(moved), ms(healed))
}

// nodeOf returns the NATS node host i is connected to.
func (fc *faultCluster) nodeOf(t *testing.T, i int) int {
	t.Helper()
	n := -1
	checkfor.Within(t, 10*time.Second, func() error {
		for k, node := range fc.nodes {
			if slices.Contains(node.clientIPs(), fc.hostNS[i].IP) {
				n = k
				return nil
			}
		}
		return fmt.Errorf("host-%d is connected to no NATS node", i)
	})
	return n
}

// membersStream is the membership bucket's stream.
const membersStream = "KV_FAULTS_MEMBERS"

// isolateNodeOf cuts the NATS node host i is connected to off from the
// other two, while every host still reaches it: host i moves to the
// majority; after the heal every partition is owned by the three. The
// node does not lead the membership bucket when cut off: that node's loss
// stalls every host's renewals until the majority elects a leader, which
// BenchmarkBucketLeaderCutOff measures against the lease TTL.
func (fc *faultCluster) isolateNodeOf(t *testing.T, load *clusterLoad, i int) {
	fc.settled(t)
	n := fc.nodeOf(t, i)
	fc.nodes[n].leadOff(t, membersStream)
	var rest []*netns.NS
	for k, node := range fc.nodes {
		if k != n {
			rest = append(rest, node.ns)
		}
	}
	led := fc.nodes[n].leader(membersStream)
	ended := fc.allTermsEnded()
	cutAt := time.Now()
	fc.net.Cut(fc.nodes[n].ns, rest...)
	var to int
	checkfor.Within(t, 2*faultLeaseTTL+10*time.Second, func() error {
		if to = fc.nodeOf(t, i); to == n {
			return fmt.Errorf("host-%d still on n%d, the node cut off", i, n)
		}
		return nil
	})
	moved := time.Since(cutAt)
	if moved > faultLeaseTTL {
		t.Errorf("host-%d moved from the node cut off to the majority after %v, more than the lease TTL %v", i, moved, faultLeaseTTL)
	}
	before := load.ackCount()
	checkfor.Within(t, 30*time.Second, func() error { return load.acked(before + 30) })
	healAt := time.Now()
	fc.net.HealAll()
	healed := fc.rejoin(t, load, i, healAt)
	healedWithin(t, "isolate", healed)
	var gaveUp []int
	for j, e := range fc.allTermsEnded() {
		gaveUp = append(gaveUp, e-ended[j])
	}
	t.Logf("figure: isolate: host-%d moved from n%d (cut off from the other nodes; the membership bucket's leader %q) to n%d %v after the cut (lease TTL %v); terms ended by host-0, -1, -2: %v; all owned by the three %v after the heal",
		i, n, led, to, ms(moved), faultLeaseTTL, gaveUp, ms(healed))
}

// splitOff cuts host i and the NATS node it is connected to off from the
// other hosts and nodes together: the host reaches its node, and the node
// answers it, but nothing written through it can commit. The majority goes
// on; the host stops by its own clock; after the heal it rejoins. As in
// isolateNodeOf, the node does not lead the membership bucket.
func (fc *faultCluster) splitOff(t *testing.T, load *clusterLoad, i int) {
	fc.settled(t)
	n := fc.nodeOf(t, i)
	fc.nodes[n].leadOff(t, membersStream)
	node := fc.nodes[n].ns
	var restNodes []*netns.NS
	for k, nd := range fc.nodes {
		if k != n {
			restNodes = append(restNodes, nd.ns)
		}
	}
	_, restHosts := fc.others(i)
	var restHostNS []*netns.NS
	for j := range fc.hosts {
		if j != i {
			restHostNS = append(restHostNS, fc.hostNS[j])
		}
	}
	ended := fc.termsEnded(i)
	load.dead[i].Store(true)
	cutAt := time.Now()
	fc.net.Cut(fc.hostNS[i], restNodes...)
	fc.net.Cut(node, append(restNodes, restHostNS...)...)
	fenced, moved, claimed := fc.stops(t, i, cutAt, ended)
	before := load.ackCount()
	checkfor.Within(t, 30*time.Second, func() error { return load.acked(before + 30) })
	if got := fc.readyz(i); got != 503 {
		t.Errorf("GET /readyz on host-%d of the minority: %d, want 503", i, got)
	}
	healAt := time.Now()
	fc.net.HealAll()
	healed := fc.rejoin(t, load, i, healAt)
	healedWithin(t, "split", healed)
	t.Logf("figure: split: host-%d with n%d on the minority: fenced (readyz 503) %v after the split; first claim of its partitions by %v %v after it (lease TTL %v); all owned by the majority %v after it; all owned by the three %v after the heal",
		i, n, ms(fenced), restHosts, ms(claimed), faultLeaseTTL, ms(moved), ms(healed))
}

// unsteady waits, once host i's unsteady link is steady again at healAt,
// until every partition is owned — by the three, or by the other two
// while host i stays out after too many ended terms in a minute — and
// checks host i ended at most maxGiveUps terms over it. It returns how
// long after healAt every partition was owned, and the terms ended.
func (fc *faultCluster) unsteady(t *testing.T, load *clusterLoad, i int, healAt time.Time, ended int) (time.Duration, int) {
	t.Helper()
	hs, ids := fc.others(i)
	checkfor.Within(t, 2*faultLeaseTTL+10*time.Second, func() error {
		if allOwnedBy(fc.hosts, faultSubs, "host-0", "host-1", "host-2") == nil {
			return nil
		}
		return allOwnedBy(hs, faultSubs, ids...)
	})
	settled := time.Since(healAt)
	healedWithin(t, "unsteady link", settled)
	before := load.ackCount()
	checkfor.Within(t, 30*time.Second, func() error { return load.acked(before + 30) })
	giveUps := fc.termsEnded(i) - ended
	if giveUps > maxGiveUps {
		t.Errorf("host-%d gave its partitions up %d times in a minute of an unsteady link, want at most %d", i, giveUps, maxGiveUps)
	}
	return settled, giveUps
}

// maxGiveUps bounds an unsteady host's give-ups within a minute: a term
// per rejoin (cluster: three a minute) and the first.
const maxGiveUps = 4

// lossy makes host i's links to every NATS node lose pct % of their
// packets each way for d.
func (fc *faultCluster) lossy(t *testing.T, load *clusterLoad, i, pct int, d time.Duration) {
	fc.settled(t)
	ended := fc.termsEnded(i)
	fc.net.Loss(fc.hostNS[i], pct, fc.natsNS()...)
	time.Sleep(d)
	fc.net.Loss(fc.hostNS[i], 0, fc.natsNS()...)
	settled, giveUps := fc.unsteady(t, load, i, time.Now(), ended)
	t.Logf("figure: loss: host-%d ended %d terms in %v at %d%% loss; every partition owned %v after the loss ended",
		i, giveUps, d, pct, ms(settled))
}

// flap cuts host i's links to NATS for 2 s and heals them for 1 s, four
// times over.
func (fc *faultCluster) flap(t *testing.T, load *clusterLoad, i int) {
	fc.settled(t)
	ended := fc.termsEnded(i)
	for range 4 {
		fc.cut(i)
		time.Sleep(2 * time.Second)
		fc.heal(i)
		time.Sleep(time.Second)
	}
	settled, giveUps := fc.unsteady(t, load, i, time.Now(), ended)
	t.Logf("figure: flap: host-%d ended %d terms over four 2 s cuts; every partition owned %v after the last heal", i, giveUps, ms(settled))
}

// pause stops host i (SIGSTOP) for 2 lease TTLs while its attempts run and
// commits wait behind them, and wakes it (SIGCONT); it returns when the
// host woke.
func (fc *faultCluster) pause(t *testing.T, load *clusterLoad, i int) time.Time {
	fc.settled(t)
	fc.backlog(t, i, 10)
	load.dead[i].Store(true)
	stopAt := time.Now()
	fc.hosts[i].Signal(syscall.SIGSTOP)
	hs, ids := fc.others(i)
	checkfor.Within(t, 2*faultLeaseTTL+10*time.Second, func() error { return allOwnedBy(hs, faultSubs, ids...) })
	moved := time.Since(stopAt)
	// Paused for 2 TTLs in all (24 s), past an attempt's timeout (10 s):
	// the calls the host was in end as it wakes, answered or timed out,
	// and its workers would go on to the next but for the fence.
	time.Sleep(time.Until(stopAt.Add(2 * faultLeaseTTL)))
	wakeAt := time.Now()
	fc.hosts[i].Signal(syscall.SIGCONT)
	healed := fc.rejoin(t, load, i, wakeAt)
	fc.slow(i, 20*time.Millisecond)
	healedWithin(t, "pause", healed)
	t.Logf("figure: pause: host-%d stopped %v; its partitions owned by the others %v after the SIGSTOP (lease TTL %v); all owned by the three %v after the SIGCONT",
		i, ms(wakeAt.Sub(stopAt)), ms(moved), faultLeaseTTL, ms(healed))
	return wakeAt
}

func ms(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

// verify stops the load and checks what must hold after every fault of
// the run: every append answered 201 or 503 with Retry-After; every
// acknowledged append in the log at its version; every OrderShipped
// notified, each aggregate's in order; the projection the fold of the log
// on every host; no two hosts' calls for one order overlapping in time;
// and no call for a partition another host had claimed — but those
// allowed accepts.
func (fc *faultCluster) verify(t *testing.T, load *clusterLoad, allowed func([]strayCall) error) {
	t.Helper()
	load.halt()
	if len(load.refused) > 0 {
		t.Errorf("appends answered neither 201 nor 503 with Retry-After (%d): %q", len(load.refused), load.refused)
	}
	logs := map[string][]clusterEvent{}
	for _, g := range fc.ids {
		for _, id := range g {
			logs[id] = readAggregate(t, fc.hosts[0], id)
		}
	}
	lost := 0
	for _, a := range load.acks {
		evs := logs[a.id]
		if a.version == 0 || int(a.version) > len(evs) || evs[a.version-1].N != a.n {
			lost++
			t.Errorf("acknowledged append %d of %s at version %d is not in the log (%d commits): %s", a.n, a.id, a.version, len(evs), whereIs(load, logs, a))
		}
	}
	want := foldSummaries(logs, fc.buyer)
	for _, h := range fc.hosts {
		h.waitSummaries(t, want)
	}
	shipped := 0
	for _, vs := range shippedVersions(logs) {
		shipped += len(vs)
	}
	checkfor.Within(t, 60*time.Second, func() error {
		all := merged(fc.svcs)
		if n := notifiedOrders(t, all, logs); n != shipped {
			return fmt.Errorf("%d of %d OrderShipped notified; not: %v", n, shipped, missingNotifications(all, logs))
		}
		return nil
	})
	checkNotifiedInOrder(t, merged(fc.svcs), logs)
	if o := fc.calls.overlaps(); len(o) > 0 {
		t.Errorf("%d pairs of calls for one order from two hosts overlap in time:\n%s", len(o), strings.Join(o, "\n"))
	}
	if s := fc.strays(fc.claims(t)); len(s) > 0 {
		if allowed == nil {
			t.Errorf("%d calls for partitions another host had claimed:\n%v", len(s), s)
		} else if err := allowed(s); err != nil {
			t.Errorf("calls for partitions another host had claimed: %v", err)
		}
	}
	t.Logf("%d appends acknowledged, %d lost, %d sent again; %d calls", load.ackCount(), lost, load.retries.Load(), len(fc.calls.all))
}

// whereIs says where the log holds an acknowledged append, what it holds
// at the version acknowledged, and which other acknowledgement names that
// version.
func whereIs(load *clusterLoad, logs map[string][]clusterEvent, a acked) string {
	var b strings.Builder
	found := false
	for id, evs := range logs {
		for v, e := range evs {
			if e.N == a.n {
				fmt.Fprintf(&b, "it is at %s@%d; ", id, v+1)
				found = true
			}
		}
	}
	if !found {
		b.WriteString("it is nowhere in the log; ")
	}
	if evs := logs[a.id]; a.version > 0 && int(a.version) <= len(evs) {
		fmt.Fprintf(&b, "at %s@%d is append %d; ", a.id, a.version, evs[a.version-1].N)
	}
	for _, o := range load.acks {
		if o.id == a.id && o.version == a.version && o.n != a.n {
			fmt.Fprintf(&b, "append %d was acknowledged at the same version; ", o.n)
		}
	}
	return b.String()
}
