// Package clustertest joins real cluster.Cluster hosts to a NATS server
// for the tests of what shows a deployment (the REST API's /v1/cluster, the
// console, the CLI): each on its own connection, claiming in a real ledger,
// with an engine that works on no partition, since those tests look at
// ownership only. Only tests import it.
package clustertest

import (
	"context"
	"testing"
	"time"

	"github.com/berthhq/berth/cluster"
	"github.com/berthhq/berth/ledger"
	"github.com/nats-io/nats.go"
)

// LeaseTTL is the lease TTL of the hosts Join opens: short, so that a host
// killed in a test is gone within seconds, and at least cluster.lease-ttl's
// least.
const LeaseTTL = 3 * time.Second

// Host is one joined host.
type Host struct {
	// Cluster is the host's place in the deployment.
	Cluster *cluster.Cluster
	// Conn is its own NATS connection: closing it kills the host (no
	// goodbye; its lease runs out).
	Conn *nats.Conn
}

// idleEngine is told what it owns and works on nothing.
type idleEngine struct{}

func (idleEngine) Own(context.Context, string, map[int]uint64) error { return nil }

// Join opens a cluster.Cluster as id (address http://ID.example:8080,
// version "test") on a new connection to url, sharing out subs and
// claiming in st, and closes both when the test ends.
func Join(t testing.TB, url, id string, st ledger.Store, subs ...string) *Host {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	c, err := cluster.Open(t.Context(), nc, cluster.Options{Host: id, Address: "http://" + id + ".example:8080", Version: "test",
		Ledger: st, Engine: idleEngine{}, Subscriptions: subs, LeaseTTL: LeaseTTL})
	if err != nil {
		t.Fatalf("clustertest: open %s: %v", id, err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return &Host{Cluster: c, Conn: nc}
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
