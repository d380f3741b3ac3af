package tests

import (
	"fmt"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/internal/testing/netns"
)

// BenchmarkBucketLeaderCutOff measures the lease TTL a deployment needs to
// keep its partitions through the loss of the NATS node that leads the
// membership bucket: on the netns harness (netfault_test.go), under load,
// that node is cut off from the other two (the hosts still reach it), and
// for 2 TTLs or 15 s, whichever is longer — the majority's election of a
// new leader (4–9 s) and a term's end (0.8 TTL) both fall in it — the hosts
// are watched; then it heals. Per TTL it reports the terms the hosts ended
// (terms-ended), how many hosts ended one (hosts-gave-up), how long some
// host was not ready (not-ready-s, sampled every 100 ms) and how long after
// the heal every host was ready and every partition owned by the three
// (heal-s). One run a TTL:
//
//	go test ./tests -run '^$' -bench BenchmarkBucketLeaderCutOff -benchtime 1x
func BenchmarkBucketLeaderCutOff(b *testing.B) {
	for _, ttl := range []time.Duration{6 * time.Second, 9 * time.Second, 12 * time.Second, 15 * time.Second} {
		b.Run(ttl.String(), func(b *testing.B) {
			for range b.N {
				bucketLeaderCutOff(b, ttl)
			}
		})
	}
}

func bucketLeaderCutOff(b *testing.B, ttl time.Duration) {
	fc, load := startFaultClusterTTL(b, ttl)
	defer load.halt()
	fc.settled(b)
	leader := -1
	checkfor.Within(b, 10*time.Second, func() error {
		name := fc.nodes[0].leader(membersStream)
		for k, n := range fc.nodes {
			if n.name == name {
				leader = k
				return nil
			}
		}
		return fmt.Errorf("no leader of the membership bucket: %q", name)
	})
	var rest []*netns.NS
	for k, n := range fc.nodes {
		if k != leader {
			rest = append(rest, n.ns)
		}
	}
	ended := fc.allTermsEnded()
	watch := max(2*ttl, 15*time.Second)
	cutAt := time.Now()
	fc.net.Cut(fc.nodes[leader].ns, rest...)
	samples, notReady := 0, 0
	for time.Since(cutAt) < watch {
		samples++
		for i := range fc.hosts {
			if fc.readyz(i) != 200 {
				notReady++
				break
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	terms, gaveUp := 0, 0
	for i, e := range fc.allTermsEnded() {
		terms += e - ended[i]
		if e > ended[i] {
			gaveUp++
		}
	}
	healAt := time.Now()
	fc.net.HealAll()
	fc.settled(b)
	b.ReportMetric(float64(terms), "terms-ended")
	b.ReportMetric(float64(gaveUp), "hosts-gave-up")
	b.ReportMetric(watch.Seconds()*float64(notReady)/float64(samples), "not-ready-s")
	b.ReportMetric(time.Since(healAt).Seconds(), "heal-s")
}
