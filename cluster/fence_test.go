package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/nats-io/nats.go/jetstream"
)

// TestEngineFencedAtTermEnd: the engine is told the term's end — TTL -
// Margin after the last confirmed write was sent — with every renewal, so
// it stops calling handlers then by its own clock, whatever the cluster's
// loop and the engine's stops are doing.
func TestEngineFencedAtTermEnd(t *testing.T) {
	_, clock, _, h := aloneOnFakeClock(t)
	if got, want := h.eng.leaseUntil(), start.Add(8*time.Second); !got.Equal(want) {
		t.Fatalf("engine fenced at %v, want %v", got, want)
	}
	renewals := h.c.Stats().Renewals
	clock.Advance(10 * time.Second / 3)
	checkfor.Nil(t, 5*time.Second, 5*time.Millisecond, func() error {
		if s := h.c.Stats(); s.Renewals <= renewals {
			return fmt.Errorf("no renewal: %+v", s)
		}
		return nil
	})
	sent := start.Add(10 * time.Second / 3)
	if got, want := h.eng.leaseUntil(), sent.Add(8*time.Second); !got.Equal(want) {
		t.Fatalf("engine fenced at %v after a renewal, want %v", got, want)
	}
	if !h.c.LeaseValid() {
		t.Fatal("lease not valid after a renewal")
	}
	if err := clock.BlockUntil(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	h.nc.Close() // every renewal fails from now on
	clock.Advance(8 * time.Second)
	if h.c.LeaseValid() {
		t.Fatal("lease valid at the term's end")
	}
	if got, want := h.eng.leaseUntil(), sent.Add(8*time.Second); !got.Equal(want) {
		t.Fatalf("engine fenced at %v after failed renewals, want %v", got, want)
	}
}

// TestNewTermFencedOnlyAfterGiveUp: when the lease is lost and joined
// again, the engine may act again only once the old term's partitions were
// given up — however long the engine takes to stop them — since another
// host may have claimed them in the gap between the terms.
func TestNewTermFencedOnlyAfterGiveUp(t *testing.T) {
	n, clock, _, h := aloneOnFakeClock(t)
	gate := make(chan struct{})
	h.eng.mu.Lock()
	h.eng.stopGate = gate
	h.eng.mu.Unlock()
	opened := false
	defer func() {
		if !opened {
			close(gate)
		}
	}()
	if err := bucket(t, n.URL()).Delete(t.Context(), "solo"); err != nil {
		t.Fatal(err)
	}
	checkfor.Nil(t, 5*time.Second, 5*time.Millisecond, func() error {
		if s := h.c.Stats(); s.LeasesLost != 1 {
			return fmt.Errorf("the lease not found lost: %+v", s)
		}
		return nil
	})
	if err := clock.BlockUntil(t.Context(), 1); err != nil { // waiting to join again
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	checkfor.Nil(t, 5*time.Second, 5*time.Millisecond, func() error {
		if s := h.c.Stats(); s.Renewals < 2 {
			return fmt.Errorf("not joined again: %+v", s)
		}
		return nil
	})
	// Joined as a new incarnation, but the engine is still stopping the
	// old term's partitions: it must not act.
	if h.eng.leaseUntil().After(clock.Now()) || h.c.LeaseValid() {
		t.Fatalf("engine fenced until %v (now %v) while the old term's partitions are being given up", h.eng.leaseUntil(), clock.Now())
	}
	close(gate)
	opened = true
	checkfor.Nil(t, 5*time.Second, 5*time.Millisecond, func() error {
		if !h.c.LeaseValid() || !h.eng.leaseUntil().After(clock.Now()) {
			return fmt.Errorf("the new term not adopted: fenced until %v", h.eng.leaseUntil())
		}
		return ownsAll(h)
	})
}

// staleReads answers every Get with the entry it read first, as a NATS
// node cut off from the majority answers with the last value it has; the
// rest goes to the real server.
type staleReads struct {
	jetstream.KeyValue
	entry jetstream.KeyValueEntry
}

func (s *staleReads) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	if s.entry == nil {
		e, err := s.KeyValue.Get(ctx, key)
		if err != nil {
			return nil, err
		}
		s.entry = e
	}
	return s.entry, nil
}

// TestRenewalNotConfirmedByAStaleRead: a renewal refused for its revision
// is not taken as landed when the read-back shows this incarnation at the
// revision it already had — what a node behind the majority answers — but
// only at a later one.
func TestRenewalNotConfirmedByAStaleRead(t *testing.T) {
	n, _, _, h := aloneOnFakeClock(t)
	kv := bucket(t, n.URL())
	l := h.c.lease
	// The lease's goroutine waits for its next renewal, which never comes
	// (the clock does not move): this test drives a copy of the lease.
	stale := &staleReads{KeyValue: kv}
	if _, err := stale.Get(t.Context(), "solo"); err != nil {
		t.Fatal(err)
	}
	copyOf := newLease(stale, "solo", &h.c.opts, l.info, &counters{}, time.Second)
	copyOf.rev = stale.entry.Revision()
	// The key moves on under another incarnation (it expired and another
	// process with this id took it): the real server refuses the renewal.
	if _, err := kv.Put(t.Context(), "solo", memberInfo{Incarnation: "another"}.encode()); err != nil {
		t.Fatal(err)
	}
	err := copyOf.renewOnce(t.Context())
	if err == nil {
		t.Fatal("renewal confirmed by a stale read")
	}
	if copyOf.stats.renewals.Load() != 0 || copyOf.stats.staleReads.Load() != 1 {
		t.Fatalf("renewals %d, stale reads %d", copyOf.stats.renewals.Load(), copyOf.stats.staleReads.Load())
	}
	// A read showing this incarnation at a later revision is its own write
	// that landed though its ack was lost.
	value := l.info.encode()
	rev, err := kv.Put(t.Context(), "solo", value)
	if err != nil {
		t.Fatal(err)
	}
	stale.entry = nil
	copyOf.rev = rev - 1
	if err := copyOf.renewOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	if copyOf.rev != rev {
		t.Fatalf("revision %d after a landed renewal, want %d", copyOf.rev, rev)
	}
}

// TestRejoinsBoundedPerMinute: a lone host whose key is lost again and
// again rejoins every time, the fourth loss within a minute too: no other
// host could take its partitions, so holding itself out would leave them
// unowned (TestFlappingHostHoldsOutBesideAHealthyPeer has the bound).
func TestRejoinsBoundedPerMinute(t *testing.T) {
	n, clock, _, h := aloneOnFakeClock(t)
	kv := bucket(t, n.URL())
	for i := 1; i <= maxRejoins+2; i++ {
		loseKey(t, clock, kv, h, uint64(i))
		renewals := h.c.Stats().Renewals
		clock.Advance(time.Second)
		checkfor.Nil(t, 5*time.Second, 5*time.Millisecond, func() error {
			if s := h.c.Stats(); s.Renewals <= renewals {
				return fmt.Errorf("not rejoined after loss %d: %+v", i, s)
			}
			return ownsAll(h)
		})
		if err := clock.BlockUntil(t.Context(), 1); err != nil {
			t.Fatal(err)
		}
	}
	if s := h.c.Stats(); s.HoldDowns != 0 {
		t.Fatalf("a lone host held itself out: %+v", s)
	}
}

// TestReconnectAfterRenewalsFailForASixth: once renewals have failed for a
// sixth of the TTL (a renewal's timeout) the lease has the connection move
// to another NATS server — the one it is on may be cut off from the
// majority while it still answers — and not again before a third.
func TestReconnectAfterRenewalsFailForASixth(t *testing.T) {
	_, clock, _, h := aloneOnFakeClock(t)
	h.nc.Close() // every renewal fails from now on
	const third, sixth = 10 * time.Second / 3, 10 * time.Second / 6
	var failing, moved time.Time
	want := uint64(0)
	for clock.Now().Before(start.Add(4 * third)) {
		if err := clock.BlockUntil(t.Context(), 1); err != nil {
			t.Fatal(err)
		}
		d, ok := clock.NextFire()
		if !ok {
			t.Fatal("the lease waits on no timer")
		}
		failures := h.c.Stats().RenewalFailures
		clock.Advance(d)
		checkfor.Nil(t, 5*time.Second, 5*time.Millisecond, func() error {
			if s := h.c.Stats(); s.RenewalFailures <= failures {
				return fmt.Errorf("no renewal tried: %+v", s)
			}
			return nil
		})
		now := clock.Now()
		if failing.IsZero() {
			failing = now
		}
		if now.Sub(failing) >= sixth && now.Sub(moved) >= third {
			want++
			moved = now
		}
		if s := h.c.Stats(); s.Reconnects != want {
			t.Fatalf("%v after the first failed renewal: %d reconnects, want %d", now.Sub(failing), s.Reconnects, want)
		}
	}
	if want < 2 {
		t.Fatalf("only %d reconnects checked", want)
	}
}
