package cluster

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/internal/testing/natstest"
	"github.com/berthhq/berth/ledger"
)

var subs = []string{"orders-projection", "mailer"}

const partitions = 16

// threeHosts starts h1, h2, h3 on one NATS node and waits until they split
// both subscriptions between them.
func threeHosts(t *testing.T, ttl time.Duration) (*natstest.Node, *recordingStore, []*host) {
	t.Helper()
	n := natstest.RunServer(t)
	st := openLedger(t)
	var hosts []*host
	for _, id := range []string{"h1", "h2", "h3"} {
		hosts = append(hosts, startHost(t, n.URL(), id, st, Options{Subscriptions: subs, LeaseTTL: ttl}))
	}
	checkfor.Nil(t, 10*time.Second, 20*time.Millisecond, func() error {
		return settled(t, st, hosts, subs, partitions)
	})
	return n, st, hosts
}

// TestSplit: three hosts split 2 subscriptions x 16 partitions, each
// partition owned by exactly one (in the engines and in the ledger), none
// with more than ceil(16/3) = 6 of a subscription (so none with fewer than 4).
func TestSplit(t *testing.T) {
	_, st, hosts := threeHosts(t, 10*time.Second)
	for _, h := range hosts {
		for _, sub := range subs {
			if n := len(h.eng.owned(sub)); n < 4 || n > 6 {
				t.Errorf("%s owns %d partitions of %s, want 4 to 6", h.id, n, sub)
			}
		}
		owned := h.c.Owned()
		for _, sub := range subs {
			for p, e := range owned[sub] {
				if o := ledgerOwners(t, st, sub, partitions)[p]; o != (claim{h.id, e}) {
					t.Errorf("%s holds %s/%d at epoch %d, the ledger says %+v", h.id, sub, p, e, o)
				}
			}
		}
	}
	if ms := hosts[0].c.Members(); len(ms) != 3 || ms[0].Host != "h1" || !ms[0].Self || ms[1].Address != "http://h2:8080" {
		t.Fatalf("members %+v", ms)
	}
	as, err := hosts[1].c.Assignments(t.Context())
	if err != nil || len(as) != len(subs)*partitions {
		t.Fatalf("assignments: %d, %v", len(as), err)
	}
	for _, a := range as {
		if a.Host == "" || a.Host != a.Owner || a.Epoch == 0 || a.Released {
			t.Fatalf("assignment %+v", a)
		}
	}
	if s := hosts[2].c.Stats(); s.Claims == 0 || s.Renewals == 0 || s.GiveUps != 0 || s.Lost != 0 {
		t.Fatalf("stats %+v", s)
	}
	assertNoOverlap(t, hosts, subs, partitions)
}

// TestGracefulClose: a host that closes releases its partitions and the
// others own them at once — well within a renewal interval (TTL/3), so not
// through the lease running out — after its engine stopped them.
func TestGracefulClose(t *testing.T) {
	_, st, hosts := threeHosts(t, 10*time.Second)
	if err := hosts[2].c.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := hosts[2].eng.total(); n != 0 {
		t.Fatalf("the closed host's engine still owns %d partitions", n)
	}
	checkfor.Nil(t, 2*time.Second, 10*time.Millisecond, func() error {
		return settled(t, st, hosts[:2], subs, partitions)
	})
	for _, a := range mustAssignments(t, hosts[0].c) {
		if a.Released || a.Owner == "h3" {
			t.Fatalf("after h3 left: %+v", a)
		}
	}
	if s := hosts[2].c.Stats(); s.Releases == 0 {
		t.Fatalf("h3 released nothing: %+v", s)
	}
	assertNoOverlap(t, hosts, subs, partitions)
	if ms := hosts[0].c.Members(); len(ms) != 2 {
		t.Fatalf("members after a close: %+v", ms)
	}
}

func mustAssignments(t *testing.T, c *Cluster) []Assignment {
	t.Helper()
	as, err := c.Assignments(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return as
}

// TestAbandonedHost: a host whose heartbeats stop (its NATS connection
// closed, as a kill or a network cut leaves it) gives up its partitions on
// its own clock before its lease expires on the server; the others own them
// within 2x TTL, claiming each only after that give-up; and a write the
// stale owner still makes at its old epoch is fenced.
func TestAbandonedHost(t *testing.T) {
	const ttl = 2 * time.Second
	_, st, hosts := threeHosts(t, ttl)
	h3 := hosts[2]
	held := h3.c.Owned()
	cut := time.Now()
	h3.nc.Close()
	checkfor.Nil(t, 2*ttl, 10*time.Millisecond, func() error {
		return settled(t, st, hosts[:2], subs, partitions)
	})
	if n := h3.eng.total(); n != 0 {
		t.Fatalf("the abandoned host's engine still owns %d partitions", n)
	}
	if s := h3.c.Stats(); s.GiveUps != 1 || s.Releases != 0 {
		t.Fatalf("abandoned host's stats %+v", s)
	}
	for sub, ps := range held {
		for p, epoch := range ps {
			stopped := h3.eng.stoppedAt(sub, p)
			if stopped.IsZero() || stopped.Before(cut) {
				t.Fatalf("%s/%d: h3 stopped it at %v (cut at %v)", sub, p, stopped, cut)
			}
			owner := Assign(sub, partitions, []string{"h1", "h2"})[p]
			c, ok := st.firstClaim(sub, p, owner, cut)
			if !ok {
				t.Fatalf("%s/%d: no claim by %s", sub, p, owner)
			}
			if !stopped.Before(c.at) {
				t.Fatalf("%s/%d: h3 stopped it at %v, %s claimed it at %v", sub, p, stopped, owner, c.at)
			}
			if c.epoch != epoch+1 {
				t.Fatalf("%s/%d: claimed at epoch %d, h3 held %d", sub, p, c.epoch, epoch)
			}
			// A write h3 had in flight lands now: the ledger fences it.
			err := st.Update(context.Background(), func(tx ledger.Tx) error {
				if err := tx.Fence(sub, p, "h3", epoch); err != nil {
					return err
				}
				return tx.SetPartitionCheckpoint(sub, p, 99)
			})
			if !errors.Is(err, ledger.ErrFenced) {
				t.Fatalf("%s/%d: a stale write: %v, want ErrFenced", sub, p, err)
			}
		}
	}
	assertNoOverlap(t, hosts, subs, partitions)
}

// TestJoin: a fourth host takes a fair share (4 of 16 of each
// subscription) and only what it takes moves, plus the few extra moves the
// load bound costs; partitions that stay keep their epoch, and every move is
// a stop before a start.
func TestJoin(t *testing.T) {
	n, st, hosts := threeHosts(t, 10*time.Second)
	before := map[string][]claim{}
	for _, sub := range subs {
		before[sub] = ledgerOwners(t, st, sub, partitions)
	}
	hosts = append(hosts, startHost(t, n.URL(), "h4", st, Options{Subscriptions: subs, LeaseTTL: 10 * time.Second}))
	checkfor.Nil(t, 5*time.Second, 10*time.Millisecond, func() error {
		return settled(t, st, hosts, subs, partitions)
	})
	for _, sub := range subs {
		if got := len(hosts[3].eng.owned(sub)); got != 4 {
			t.Fatalf("h4 owns %d partitions of %s, want 4", got, sub)
		}
		after := ledgerOwners(t, st, sub, partitions)
		extra := 0
		for p := range partitions {
			switch {
			case after[p].host == before[sub][p].host:
				if after[p].epoch != before[sub][p].epoch {
					t.Fatalf("%s/%d stayed on %s but its epoch went %d → %d", sub, p, after[p].host, before[sub][p].epoch, after[p].epoch)
				}
			case after[p].host != "h4":
				extra++
			}
		}
		// As many as Assign itself moves (TestAssignMovement bounds it).
		want := 0
		a3, a4 := Assign(sub, partitions, []string{"h1", "h2", "h3"}), Assign(sub, partitions, []string{"h1", "h2", "h3", "h4"})
		for p := range partitions {
			if a3[p] != a4[p] && a4[p] != "h4" {
				want++
			}
		}
		if extra != want {
			t.Fatalf("%s: %d partitions moved between the old hosts, Assign moves %d", sub, extra, want)
		}
	}
	assertNoOverlap(t, hosts, subs, partitions)
}

// TestSetSubscriptions: a subscription added at run time is shared out, and
// one removed is stopped and released on every host.
func TestSetSubscriptions(t *testing.T) {
	_, st, hosts := threeHosts(t, 10*time.Second)
	next := []string{"mailer", "billing"}
	for _, h := range hosts {
		if err := h.c.SetSubscriptions(t.Context(), next); err != nil {
			t.Fatal(err)
		}
	}
	checkfor.Nil(t, 5*time.Second, 10*time.Millisecond, func() error {
		for _, h := range hosts {
			if o := h.eng.owned("orders-projection"); len(o) != 0 {
				return fmt.Errorf("%s's engine still on orders-projection partitions %v", h.id, o)
			}
		}
		return settled(t, st, hosts, next, partitions)
	})
	checkfor.Nil(t, 5*time.Second, 10*time.Millisecond, func() error {
		for p, o := range ledgerOwners(t, st, "orders-projection", partitions) {
			if !isReleased(o.host) {
				return fmt.Errorf("orders-projection partition %d %q's in the ledger, not released", p, o.host)
			}
		}
		return nil
	})
	if as := mustAssignments(t, hosts[0].c); len(as) != 2*partitions || as[0].Subscription != "billing" {
		t.Fatalf("assignments %+v", as)
	}
	if err := hosts[0].c.SetSubscriptions(t.Context(), []string{""}); !errors.Is(err, errOptions) {
		t.Fatalf("an empty name: %v", err)
	}
	assertNoOverlap(t, hosts, subs, partitions)
}
