package cluster

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/internal/testing/natstest"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// TestHostOnAMinorityNodeMovesToTheMajority: a host connected to a NATS
// node that is cut off from the other two — it still answers the host, but
// nothing written through it can commit — moves its connection to the
// majority and renews there before its term ends: no host gives its
// partitions up, and no partition is worked on by two hosts at once.
func TestHostOnAMinorityNodeMovesToTheMajority(t *testing.T) {
	const ttl = 6 * time.Second
	nc, routes := natstest.RunClusterRouted(t, 3, func(o *server.Options) { o.Cluster.NoAdvertise = true })
	st := openLedger(t)
	urls := strings.Split(nc.URLs(), ",") // n1, n2, n3
	var hosts []*host
	for i, id := range []string{"h1", "h2", "h3"} {
		// h1 on n1 first; the others on the rest.
		order := append([]string{urls[i]}, append(urls[:i:i], urls[i+1:]...)...)
		conn, err := nats.Connect(strings.Join(order, ","), nats.DontRandomize(), nats.MaxReconnects(-1),
			nats.ReconnectWait(100*time.Millisecond), nats.PingInterval(time.Second), nats.MaxPingsOutstanding(2))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(conn.Close)
		eng := newFakeEngine(time.Now)
		c, err := Open(t.Context(), conn, Options{Host: id, Address: "http://" + id + ":8080", Ledger: st, Engine: eng,
			Subscriptions: subs, LeaseTTL: ttl, Replicas: 3})
		if err != nil {
			t.Fatalf("open %s: %v", id, err)
		}
		t.Cleanup(func() { c.Close(t.Context()) })
		hosts = append(hosts, &host{id: id, nc: conn, eng: eng, c: c})
	}
	h1 := hosts[0]
	if got := h1.nc.ConnectedServerName(); got != "n1" {
		t.Fatalf("h1 on %q, want n1", got)
	}
	checkfor.Nil(t, 15*time.Second, 20*time.Millisecond, func() error {
		return settled(t, st, hosts, subs, partitions)
	})
	// The membership bucket led by n1 would stall every host's renewals
	// until the majority elects a leader, 4–9 s (nats-server's election
	// timeout): longer than this TTL's term, so every host would give up,
	// not only h1. That is TestBucketLeaderOnAMinorityNode's; here the
	// majority has the bucket.
	leadOff(t, nc.Nodes[0], "KV_"+DefaultBucket)
	renewals := h1.c.Stats().Renewals

	cut := time.Now()
	routes.Isolate("n1")
	checkfor.Nil(t, ttl, 20*time.Millisecond, func() error {
		if got := h1.nc.ConnectedServerName(); got == "n1" || got == "" {
			return fmt.Errorf("h1 on %q: %+v", got, h1.c.Stats())
		}
		return nil
	})
	moved := time.Since(cut)
	checkfor.Nil(t, 2*ttl, 20*time.Millisecond, func() error {
		if s := h1.c.Stats(); s.Renewals <= renewals || !h1.c.LeaseValid() {
			return fmt.Errorf("h1 not renewed on the majority: %+v", s)
		}
		return nil
	})
	renewed := time.Since(cut)
	for _, h := range hosts {
		if s := h.c.Stats(); s.GiveUps != 0 {
			t.Errorf("%s gave its partitions up %d times: %+v", h.id, s.GiveUps, s)
		}
	}
	s := h1.c.Stats()
	t.Logf("h1 moved to %s %v after n1 was cut off, renewed there %v after it; %d forced reconnects, %d failed renewals, %d give-ups, %d stale reads",
		h1.nc.ConnectedServerName(), moved.Round(time.Millisecond), renewed.Round(time.Millisecond), s.Reconnects, s.RenewalFailures, s.GiveUps, s.StaleReads)
	routes.Heal()
	checkfor.Nil(t, 30*time.Second, 50*time.Millisecond, func() error {
		return settled(t, st, hosts, subs, partitions)
	})
	assertNoOverlap(t, hosts, subs, partitions)
}

// leadOff moves the leadership of stream away from node, and waits until
// another node leads it.
func leadOff(t *testing.T, node *natstest.Node, stream string) {
	t.Helper()
	checkfor.Nil(t, 30*time.Second, 100*time.Millisecond, func() error {
		srv := node.Server()
		if !srv.JetStreamIsStreamLeader(globalAccount, stream) {
			return nil
		}
		if err := srv.JetStreamStepdownStream(globalAccount, stream); err != nil {
			return err
		}
		return fmt.Errorf("%s leads %s", node.Name(), stream)
	})
}

// globalAccount is the account of a NATS server without accounts.
const globalAccount = "$G"
