package cluster

import (
	"fmt"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/clock"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/internal/testing/natstest"
	"github.com/nats-io/nats.go/jetstream"
)

// onFakeClock starts hosts of ids on one fake clock with a 10 s lease (the
// server's own TTL never passes in these tests), sharing "orders", and
// waits until they own its partitions between them and wait for their
// next renewals. The engines log the fake clock's time, which stands still
// while partitions move, so assertNoOverlap cannot order their handovers
// here; the fence and the ledger's epochs, which keep them apart, are
// tested on the real clock.
func onFakeClock(t *testing.T, ids ...string) (jetstream.KeyValue, *clock.Fake, *recordingStore, []*host) {
	t.Helper()
	n := natstest.RunServer(t)
	clk := clock.NewFake(start)
	st := openLedger(t)
	var hosts []*host
	for _, id := range ids {
		hosts = append(hosts, startHost(t, n.URL(), id, st, Options{Subscriptions: []string{"orders"}, LeaseTTL: 10 * time.Second, Clock: clk}))
	}
	checkfor.Nil(t, 10*time.Second, 10*time.Millisecond, func() error { return settled(t, st, hosts, []string{"orders"}, partitions) })
	if err := clk.BlockUntil(t.Context(), len(hosts)); err != nil {
		t.Fatal(err)
	}
	return bucket(t, n.URL()), clk, st, hosts
}

// loseKey deletes h's key, as a flapping link's expiry would, and waits
// until h has lost its lease for the i-th time and its lease waits to try
// again (with the other waiters of the clock, waiters in all).
func loseKey(t *testing.T, clk *clock.Fake, kv jetstream.KeyValue, h *host, i uint64, waiters ...int) {
	t.Helper()
	if err := kv.Delete(t.Context(), h.id); err != nil {
		t.Fatal(err)
	}
	checkfor.Nil(t, 5*time.Second, 5*time.Millisecond, func() error {
		if s := h.c.Stats(); s.LeasesLost != i {
			return fmt.Errorf("%s: loss %d not seen: %+v", h.id, i, s)
		}
		return nil
	})
	n := 1
	if len(waiters) > 0 {
		n = waiters[0]
	}
	if err := clk.BlockUntil(t.Context(), n); err != nil {
		t.Fatal(err)
	}
}

// advance moves clk on by d a second at a time, each step once every host's
// lease waits again, so that a healthy host renews on time.
func advance(t *testing.T, clk *clock.Fake, d time.Duration, waiters int, each func()) {
	t.Helper()
	for d > 0 {
		step := min(d, time.Second)
		clk.Advance(step)
		d -= step
		if err := clk.BlockUntil(t.Context(), waiters); err != nil {
			t.Fatal(err)
		}
		if each != nil {
			each()
		}
	}
}

// TestFlappingHostHoldsOutBesideAHealthyPeer: a host whose lease is lost
// a fourth time within a minute, while another host is a live member,
// stays out until the first loss is a minute old; its partitions stay with
// the healthy host meanwhile: given up and claimed back at most three
// times a minute.
func TestFlappingHostHoldsOutBesideAHealthyPeer(t *testing.T) {
	kv, clk, st, hosts := onFakeClock(t, "flappy", "steady")
	flappy, steady := hosts[0], hosts[1]
	orders := []string{"orders"}
	first := clk.Now()
	for i := uint64(1); i <= maxRejoins; i++ {
		loseKey(t, clk, kv, flappy, i, 2)
		renewals := flappy.c.Stats().Renewals
		advance(t, clk, time.Second, 2, nil)
		checkfor.Nil(t, 5*time.Second, 5*time.Millisecond, func() error {
			if s := flappy.c.Stats(); s.Renewals <= renewals {
				return fmt.Errorf("not rejoined after loss %d: %+v", i, s)
			}
			return settled(t, st, hosts, orders, partitions)
		})
	}
	loseKey(t, clk, kv, flappy, maxRejoins+1, 2)
	renewals := flappy.c.Stats().Renewals
	advance(t, clk, time.Second, 2, nil)
	checkfor.Nil(t, 5*time.Second, 5*time.Millisecond, func() error {
		if s := flappy.c.Stats(); s.HoldDowns != 1 {
			return fmt.Errorf("no hold-down after the fourth loss in a minute beside a live host: %+v", s)
		}
		return settled(t, st, []*host{steady}, orders, partitions)
	})
	// Until the first loss is a minute old: out, and asking again.
	advance(t, clk, first.Add(rejoinWindow).Sub(clk.Now())-time.Second, 2, func() {
		if s := flappy.c.Stats(); s.Renewals != renewals || flappy.eng.total() != 0 {
			t.Fatalf("rejoined within the minute at %v: %+v, engine owns %d", clk.Now().Sub(first), s, flappy.eng.total())
		}
	})
	if !steady.c.LeaseValid() {
		t.Fatalf("the healthy host's lease lapsed: %+v", steady.c.Stats())
	}
	advance(t, clk, 4*time.Second, 2, nil)
	checkfor.Nil(t, 5*time.Second, 5*time.Millisecond, func() error {
		if s := flappy.c.Stats(); s.Renewals <= renewals {
			return fmt.Errorf("not rejoined a minute after the first loss: %+v", s)
		}
		return settled(t, st, hosts, orders, partitions)
	})
}

// TestAllHostsHeldOutRejoinWithinTwoTTLs: when every host has used up its
// rejoins and a fault ends all their terms once more (the membership
// bucket's leader lost again and again), no host is left to take the
// partitions, so none holds itself out for long: every partition is owned
// again within twice the TTL of the fault, not after a minute.
func TestAllHostsHeldOutRejoinWithinTwoTTLs(t *testing.T) {
	kv, clk, st, hosts := onFakeClock(t, "h0", "h1", "h2")
	orders := []string{"orders"}
	const ttl = 10 * time.Second
	for i := uint64(1); i <= maxRejoins+1; i++ {
		for _, h := range hosts {
			loseKey(t, clk, kv, h, i, 1)
		}
		if err := clk.BlockUntil(t.Context(), len(hosts)); err != nil {
			t.Fatal(err)
		}
		if i > maxRejoins {
			break
		}
		advance(t, clk, time.Second, len(hosts), nil)
		checkfor.Nil(t, 5*time.Second, 5*time.Millisecond, func() error {
			return settled(t, st, hosts, orders, partitions)
		})
	}
	// Every term ended a fourth time within the minute.
	fault := clk.Now()
	owned := func() error {
		var in []*host
		for _, h := range hosts {
			if h.c.LeaseValid() {
				in = append(in, h)
			} else if n := h.eng.total(); n != 0 {
				return fmt.Errorf("%s out, and its engine works on %d partitions", h.id, n)
			}
		}
		if len(in) == 0 {
			return fmt.Errorf("no host in a term")
		}
		return settled(t, st, in, orders, partitions)
	}
	for clk.Now().Sub(fault) < 2*ttl {
		advance(t, clk, time.Second, len(hosts), nil)
		if nilWithin(time.Second, owned) == nil {
			t.Logf("every partition owned %v after the fault: %d of %d hosts in a term", clk.Now().Sub(fault), countValid(hosts), len(hosts))
			return
		}
	}
	t.Fatalf("partitions not owned within 2 TTLs (%v) of the fault: %v", 2*ttl, owned())
}

func countValid(hosts []*host) int {
	n := 0
	for _, h := range hosts {
		if h.c.LeaseValid() {
			n++
		}
	}
	return n
}

// nilWithin polls check until it returns nil or d has passed in real time,
// and returns what it returned last: the fake clock stands still meanwhile.
func nilWithin(d time.Duration, check func() error) error {
	deadline := time.Now().Add(d)
	for {
		err := check()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(5 * time.Millisecond)
	}
}
