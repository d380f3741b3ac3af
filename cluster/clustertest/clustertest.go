// Package clustertest starts hosts of a cluster for tests: a real
// cluster.Cluster on a real NATS server, each on its own connection,
// claiming in a real ledger, with an engine that works on no partition —
// for the tests of the work duties run (the jobs, the webhooks; Start) and
// of what shows a deployment (the REST API's /v1/cluster, the console, the
// CLI; Join). Only tests import it.
package clustertest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/cluster"
	"github.com/berthhq/berth/internal/clock"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/ledger"
	"github.com/nats-io/nats.go"
)

// Host is one host of a test deployment.
type Host struct {
	ID string
	// Cluster is the host's place in the deployment.
	Cluster *cluster.Cluster
	// Conn is its own NATS connection: closing it kills the host (no
	// goodbye; its lease runs out).
	Conn *nats.Conn
}

// LeaseTTL is the lease TTL of the hosts Join opens: short, so that a host
// killed in a test is gone within seconds, and at least cluster.lease-ttl's
// least.
const LeaseTTL = 3 * time.Second

// noEngine owns no partitions: the tests using this package share none.
type noEngine struct{}

func (noEngine) Own(context.Context, string, map[int]uint64) error { return nil }

func (noEngine) SetLease(time.Time) {}

// Start opens a Cluster as id on its own connection to url, over st, with
// lease TTL ttl on clock (nil: real time); it is closed at the end of the
// test.
func Start(t testing.TB, url, id string, st ledger.Store, ttl time.Duration, clock clock.Clock) *Host {
	t.Helper()
	return open(t, url, cluster.Options{Host: id, Address: "http://" + id + ":8080", Ledger: st, LeaseTTL: ttl, Clock: clock})
}

// Join opens a Cluster as id (address http://ID.example:8080, version
// "test", lease TTL LeaseTTL) on a new connection to url, sharing out subs
// and claiming in st; it is closed at the end of the test.
func Join(t testing.TB, url, id string, st ledger.Store, subs ...string) *Host {
	t.Helper()
	return open(t, url, cluster.Options{Host: id, Address: "http://" + id + ".example:8080", Version: "test",
		Ledger: st, Subscriptions: subs, LeaseTTL: LeaseTTL})
}

// open opens a Cluster with opts (its engine noEngine) on its own
// connection to url.
func open(t testing.TB, url string, opts cluster.Options) *Host {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	opts.Engine = noEngine{}
	c, err := cluster.Open(t.Context(), nc, opts)
	if err != nil {
		t.Fatalf("clustertest: open %s: %v", opts.Host, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c.Close(ctx)
	})
	return &Host{ID: opts.Host, Conn: nc, Cluster: c}
}

// Ledger opens a Badger ledger in a temporary directory for the hosts to
// share, closed when the test ends.
func Ledger(t testing.TB) ledger.Store {
	t.Helper()
	st, err := ledger.Open(t.TempDir(), ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close(context.Background()) })
	return st
}

// Stand stands h for the duty name, doing fn while it holds it.
func (h *Host) Stand(t testing.TB, name string, fn cluster.DutyFunc) *cluster.Duty {
	t.Helper()
	d, err := h.Cluster.Duty(t.Context(), name, fn)
	if err != nil {
		t.Fatalf("%s: duty %s: %v", h.ID, name, err)
	}
	return d
}

// Cut closes h's NATS connection: it renews its leases no more and hears
// nothing of the other hosts. On a clock that does not move, it then goes
// on believing it holds its duties — the timing failure fencing is for.
func (h *Host) Cut() { h.Conn.Close() }

// WaitHeld waits (up to 10 s) until d is held here, under a claim in the
// ledger, and returns the claim.
func WaitHeld(t testing.TB, d *cluster.Duty) ledger.DutyFence {
	t.Helper()
	checkfor.Nil(t, 10*time.Second, 5*time.Millisecond, func() error {
		if !d.Held() || !d.Fence().Fenced() {
			return fmt.Errorf("duty %s: held here %v, fence %+v", d.Name(), d.Held(), d.Fence())
		}
		return nil
	})
	return d.Fence()
}

// Clock is a host's clock that runs with real time until Stop, and then
// stands still: its timers fire no more, so a host on it, once cut off
// (Host.Cut), never finds out that its lease ran out.
type Clock struct {
	*clock.Fake
	stop    chan struct{}
	once    sync.Once
	stopped chan struct{}
}

// NewClock starts a Clock at the real time; it stops at the end of the
// test.
func NewClock(t testing.TB) *Clock {
	c := &Clock{Fake: clock.NewFake(time.Now()), stop: make(chan struct{}), stopped: make(chan struct{})}
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
