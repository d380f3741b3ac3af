package cluster

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/faultnet"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/internal/testing/natstest"
)

// TestNoClaimFromAHostThatRejoinedMeanwhile: a host whose key expired and
// which rejoined while another host was still reconciling on the news of
// its expiry keeps what it claimed in its new term: the other host, going
// on to the next subscription, asks again whether it is gone rather than
// trusting what it found for the first one, so no partition is worked on
// by two hosts at once.
func TestNoClaimFromAHostThatRejoinedMeanwhile(t *testing.T) {
	const ttl = 3 * time.Second
	n := natstest.RunServer(t)
	p, err := faultnet.Listen(n.URL()[len("nats://"):])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	st := openLedger(t)
	h0 := startHost(t, "nats://"+p.Addr(), "h0", st, Options{Subscriptions: subs, LeaseTTL: ttl})
	h1 := startHost(t, n.URL(), "h1", st, Options{Subscriptions: subs, LeaseTTL: ttl})
	hosts := []*host{h0, h1}
	checkfor.Nil(t, 15*time.Second, 20*time.Millisecond, func() error {
		return settled(t, st, hosts, subs, partitions)
	})
	// subs reconcile in order: "mailer", then "orders-projection".
	first, second := slices.Min(subs), slices.Max(subs)
	had := len(h1.eng.owned(first))

	// h1 takes h0's partitions of the first subscription once h0's key
	// expired; it is held there, in the middle of its pass.
	held, gate := make(chan struct{}), make(chan struct{})
	var once sync.Once
	release := sync.OnceFunc(func() { close(gate) })
	h1.eng.mu.Lock()
	h1.eng.before = func(sub string, owned map[int]uint64) {
		if sub == first && len(owned) > had {
			once.Do(func() { close(held); <-gate })
		}
	}
	h1.eng.mu.Unlock()
	t.Cleanup(release)
	p.Cut()
	select {
	case <-held:
	case <-time.After(4 * ttl):
		t.Fatalf("h1 did not take h0's partitions of %s after h0 was cut off: %+v", first, h1.c.Stats())
	}

	// h0 comes back, rejoins with a new key and claims its partitions of
	// the second subscription again, in its new term.
	p.Heal()
	checkfor.Nil(t, 4*ttl, 20*time.Millisecond, func() error {
		if got := h0.eng.owned(second); len(got) == 0 || !h0.c.LeaseValid() {
			return fmt.Errorf("h0 works on %v of %s (lease valid: %v): %+v", got, second, h0.c.LeaseValid(), h0.c.Stats())
		}
		return nil
	})
	release()
	checkfor.Nil(t, 4*ttl, 20*time.Millisecond, func() error {
		return settled(t, st, hosts, subs, partitions)
	})
	assertNoOverlap(t, hosts, subs, partitions)
}
