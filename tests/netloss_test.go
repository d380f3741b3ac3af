package tests

import (
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/checkfor"
)

// afterUnsteadyLink checks the deployment once host-0's unsteady link
// (flapping or lossy for faultFor) is steady again at healAt: every
// partition owned again — by the three, or by the other two while host-0
// stays out after too many ended terms in a minute — appends going on,
// every append answered 201 or 503 with Retry-After, no call of any host
// for a partition another host had claimed, and at most maxGiveUps
// give-ups of host-0's partitions. It returns how long after healAt every
// partition was owned, and host-0's give-ups.
func (fc *faultCluster) afterUnsteadyLink(t *testing.T, load *clusterLoad, healAt time.Time, faultFor time.Duration) (time.Duration, int) {
	t.Helper()
	checkfor.Within(t, 2*faultLeaseTTL+10*time.Second, func() error {
		if allOwnedBy(fc.hosts, faultSubs, "host-0", "host-1", "host-2") == nil {
			return nil
		}
		// Or it stays out for now, after too many losses in a minute.
		return allOwnedBy(fc.hosts, faultSubs, "host-1", "host-2")
	})
	settled := time.Since(healAt)
	before := load.ackCount()
	checkfor.Within(t, 30*time.Second, func() error { return load.acked(before + 60) })
	load.halt()
	if len(load.refused) > 0 {
		t.Errorf("appends answered neither 201 nor 503 with Retry-After: %q", load.refused)
	}
	if s := fc.strays(fc.claims(t)); len(s) > 0 {
		t.Errorf("%d calls for partitions another host had claimed:\n%v", len(s), s)
	}
	giveUps := strings.Count(fc.hosts[0].Stderr(), `msg="cluster: lease term ended; giving up partitions"`)
	if giveUps > maxGiveUps {
		t.Errorf("host-0 gave its partitions up %d times in %v of an unsteady link, want at most %d", giveUps, time.Since(healAt)+faultFor, maxGiveUps)
	}
	return settled, giveUps
}

// TestLossyLinkNeitherThrashesNorRefusesAppends: host-0's links to every
// NATS node lose 40 % of their packets for 15 s under load — each loss
// holds its stream for a 200 ms retransmission, twice that when the
// retransmission is lost too (faultnet.Lossy) — and then are clean again:
// no call of any host for a partition another host claimed, at most
// maxGiveUps give-ups of host-0's partitions, every append answered 201
// or 503 with Retry-After, every partition owned once the link is clean.
func TestLossyLinkNeitherThrashesNorRefusesAppends(t *testing.T) {
	const lossFor = 15 * time.Second
	fc, load := startFaultCluster(t)
	for _, p := range fc.proxies[0] {
		p.Lossy(0.4, 200*time.Millisecond)
	}
	time.Sleep(lossFor)
	for _, p := range fc.proxies[0] {
		p.Lossy(0, 0)
	}
	settled, giveUps := fc.afterUnsteadyLink(t, load, time.Now(), lossFor)
	t.Logf("loss: host-0 gave its partitions up %d times in %v at 40%% loss; every partition owned %v after the loss ended; %d appends acknowledged, %d sent again",
		giveUps, lossFor, settled.Round(time.Millisecond), load.ackCount(), load.retries.Load())
}
