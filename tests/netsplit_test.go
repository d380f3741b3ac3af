package tests

import (
	"fmt"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/checkfor"
)

// splitOff cuts host i and NATS node n off from the rest together: the
// node's routes to the other nodes, the host's links to the other nodes,
// and the other hosts' links to the node. The host reaches the node, and
// the node answers it, but no write through it can commit.
func (fc *faultCluster) splitOff(i, n int) {
	fc.routes.Isolate(fc.nodes[n].Name())
	for h, ps := range fc.proxies {
		for m, p := range ps {
			if (h == i) != (m == n) {
				p.Cut()
			}
		}
	}
}

// TestSplitWithAHostAndANodeOnTheMinority: host-0 and NATS node n1 cut
// off together from the other two hosts and nodes, under load. The
// majority goes on: host-0's partitions are claimed by host-1 and host-2,
// and appends through them are acknowledged. host-0 stops by its own
// clock — no call of any host for a partition another host claimed — and
// says so (/readyz 503). After the heal it rejoins by itself; every append
// acknowledged by either side is in the log at its version.
func TestSplitWithAHostAndANodeOnTheMinority(t *testing.T) {
	fc, load := startFaultCluster(t)
	subs := faultSubs

	load.dead[0].Store(true)
	cutAt := time.Now()
	fc.splitOff(0, 0)
	checkfor.Within(t, faultLeaseTTL, func() error {
		if got := fc.readyz(0); got != 503 {
			return fmt.Errorf("GET /readyz on the host of the minority: %d, want 503", got)
		}
		return nil
	})
	fenced := time.Since(cutAt)
	// The majority may have to elect the membership bucket's leader first,
	// 4-9 s, if n1 led it.
	checkfor.Within(t, 2*faultLeaseTTL+15*time.Second, func() error {
		return allOwnedBy(fc.hosts[1:], subs, "host-1", "host-2")
	})
	moved := time.Since(cutAt)
	before := load.ackCount()
	checkfor.Within(t, 30*time.Second, func() error { return load.acked(before + 30) })
	if got := fc.readyz(0); got != 503 {
		t.Errorf("GET /readyz on the host of the minority: %d, want 503", got)
	}

	healAt := time.Now()
	for i := range fc.proxies {
		fc.heal(i)
	}
	fc.routes.Heal()
	healed := fc.rejoin(t, load, 0, healAt)

	if s := fc.strays(fc.claims(t)); len(s) > 0 {
		t.Errorf("%d calls for partitions another host had claimed:\n%v", len(s), s)
	}
	ids := map[string]bool{}
	for _, a := range load.acks {
		ids[a.id] = true
	}
	lost := 0
	for id := range ids {
		evs := readAggregate(t, fc.hosts[1], id)
		for _, a := range load.acks {
			if a.id == id && (a.version == 0 || int(a.version) > len(evs) || evs[a.version-1].N != a.n) {
				lost++
				t.Errorf("acknowledged append %d of %s at version %d is not in the log (%d commits)", a.n, a.id, a.version, len(evs))
			}
		}
	}
	if m := leaseGoRE.FindString(fc.hosts[0].Stderr()); m == "" {
		t.Errorf("host-0 did not log that it stopped acting")
	}
	t.Logf("split: host-0 fenced (readyz 503) %v after the split; all owned by the majority %v after it (lease TTL %v); healed (ready, all owned by the three) %v after the heal; %d appends acknowledged, %d lost, %d sent again",
		fenced.Round(time.Millisecond), moved.Round(time.Millisecond), faultLeaseTTL, healed.Round(time.Millisecond),
		load.ackCount(), lost, load.retries.Load())
}
