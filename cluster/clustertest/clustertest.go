// Package clustertest starts hosts of a cluster for the tests of the work
// its duties run (the jobs, the webhooks): a real cluster.Cluster on a real
// NATS server, each on its own connection, over a ledger the test gives,
// with no partitions to share. Only tests import it.
package clustertest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/cluster"
	"github.com/berthhq/berth/internal/checkfor"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/subscription"
	"github.com/nats-io/nats.go"
)

// Host is one host of a test deployment.
type Host struct {
	ID string
	nc *nats.Conn
	C  *cluster.Cluster
}

// noEngine owns no partitions: the tests using this package share none.
type noEngine struct{}

func (noEngine) Own(context.Context, string, map[int]uint64) error { return nil }

// Start opens a Cluster as id on its own connection to url, over st, with
// lease TTL ttl on clock (nil: real time); it is closed at the end of the
// test.
func Start(t testing.TB, url, id string, st ledger.Store, ttl time.Duration, clock subscription.Clock) *Host {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	c, err := cluster.Open(t.Context(), nc, cluster.Options{Host: id, Address: "http://" + id + ":8080",
		Ledger: st, Engine: noEngine{}, LeaseTTL: ttl, Clock: clock})
	if err != nil {
		t.Fatalf("open %s: %v", id, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c.Close(ctx)
	})
	return &Host{ID: id, nc: nc, C: c}
}

// Stand stands h for the duty name, doing fn while it holds it.
func (h *Host) Stand(t testing.TB, name string, fn cluster.DutyFunc) *cluster.Duty {
	t.Helper()
	d, err := h.C.Duty(t.Context(), name, fn)
	if err != nil {
		t.Fatalf("%s: duty %s: %v", h.ID, name, err)
	}
	return d
}

// Cut closes h's NATS connection: it renews its leases no more and hears
// nothing of the other hosts. On a clock that does not move, it then goes
// on believing it holds its duties — the timing failure fencing is for.
func (h *Host) Cut() { h.nc.Close() }

// WaitHeld waits (up to 10 s) until d is held here, under a claim in the
// ledger, and returns the claim.
func WaitHeld(t testing.TB, d *cluster.Duty) ledger.DutyFence {
	t.Helper()
	checkfor.Cond(t, 10*time.Second, 5*time.Millisecond, "duty "+d.Name()+" held", func() bool {
		return d.Held() && d.Fence().Fenced()
	})
	return d.Fence()
}

// Clock is a host's clock that runs with real time until Stop, and then
// stands still: its timers fire no more, so a host on it, once cut off
// (Host.Cut), never finds out that its lease ran out.
type Clock struct {
	*subscription.FakeClock
	stop    chan struct{}
	once    sync.Once
	stopped chan struct{}
}

// NewClock starts a Clock at the real time; it stops at the end of the
// test.
func NewClock(t testing.TB) *Clock {
	c := &Clock{FakeClock: subscription.NewFakeClock(time.Now()), stop: make(chan struct{}), stopped: make(chan struct{})}
	go func() {
		defer close(c.stopped)
		last := time.Now()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-c.stop:
				return
			case now := <-tick.C:
				c.Advance(now.Sub(last))
				last = now
			}
		}
	}()
	t.Cleanup(c.Stop)
	return c
}

// Stop makes the clock stand still from now on; it returns once it does.
func (c *Clock) Stop() {
	c.once.Do(func() { close(c.stop) })
	<-c.stopped
}
