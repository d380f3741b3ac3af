package cluster

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/clock"
	"github.com/berthhq/berth/ledger"
	"github.com/nats-io/nats.go"
)

// ownCall is one Engine.Own call as the fake engine saw it.
type ownCall struct {
	at    time.Time // when it returned, on the engine's clock
	sub   string
	owned map[int]uint64
}

// fakeEngine is the tests' engine: it keeps what it was told to own and a
// log of every call. The cluster's callback is ours to fake; the ledger and
// NATS are real.
type fakeEngine struct {
	now func() time.Time
	mu  sync.Mutex
	cur map[string]map[int]uint64
	log []ownCall
	// until is the last SetLease.
	until time.Time
	// stopGate, when set, holds every Own that stops all of a
	// subscription's partitions until it is closed.
	stopGate chan struct{}
	// before, when set, is called at the start of every Own (and may
	// hold it).
	before func(sub string, owned map[int]uint64)
}

func (e *fakeEngine) SetLease(until time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.until = until
}

// leaseUntil returns the last SetLease.
func (e *fakeEngine) leaseUntil() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.until
}

func newFakeEngine(now func() time.Time) *fakeEngine {
	return &fakeEngine{now: now, cur: map[string]map[int]uint64{}}
}

func (e *fakeEngine) Own(_ context.Context, sub string, owned map[int]uint64) error {
	e.mu.Lock()
	gate, before := e.stopGate, e.before
	e.mu.Unlock()
	if before != nil {
		before(sub, owned)
	}
	if gate != nil && len(owned) == 0 {
		<-gate
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cur[sub] = maps.Clone(owned)
	e.log = append(e.log, ownCall{at: e.now(), sub: sub, owned: maps.Clone(owned)})
	return nil
}

// owned returns the partitions of sub the engine works on, ascending.
func (e *fakeEngine) owned(sub string) []int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Sorted(maps.Keys(e.cur[sub]))
}

func (e *fakeEngine) total() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, ps := range e.cur {
		n += len(ps)
	}
	return n
}

// stoppedAt returns when the engine was last told to stop partition p of
// sub (the first call without it after one with it); zero if never.
func (e *fakeEngine) stoppedAt(sub string, p int) time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	var at time.Time
	had := false
	for _, c := range e.log {
		if c.sub != sub {
			continue
		}
		_, has := c.owned[p]
		if had && !has {
			at = c.at
		}
		had = has
	}
	return at
}

// claimRecord is a ClaimPartition that committed.
type claimRecord struct {
	at        time.Time
	sub       string
	partition int
	host      string
	epoch     uint64
}

// recordingStore is the real Badger ledger with a note of every committed
// claim and when it committed, so tests can order claims against the
// engines' stops.
type recordingStore struct {
	ledger.Store
	mu     sync.Mutex
	claims []claimRecord
}

type recordingTx struct {
	ledger.Tx
	claims []claimRecord
}

func (t *recordingTx) ClaimPartition(sub string, p int, host string, epoch uint64) error {
	if err := t.Tx.ClaimPartition(sub, p, host, epoch); err != nil {
		return err
	}
	t.claims = append(t.claims, claimRecord{sub: sub, partition: p, host: host, epoch: epoch})
	return nil
}

func (s *recordingStore) Update(ctx context.Context, fn func(ledger.Tx) error) error {
	var rt *recordingTx
	err := s.Store.Update(ctx, func(tx ledger.Tx) error {
		rt = &recordingTx{Tx: tx}
		return fn(rt)
	})
	if err == nil && len(rt.claims) > 0 {
		now := time.Now()
		s.mu.Lock()
		for _, c := range rt.claims {
			c.at = now
			s.claims = append(s.claims, c)
		}
		s.mu.Unlock()
	}
	return err
}

// firstClaim returns the first committed claim of partition p of sub by
// host after since, false if none.
func (s *recordingStore) firstClaim(sub string, p int, host string, since time.Time) (claimRecord, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.claims {
		if c.sub == sub && c.partition == p && c.host == host && !c.at.Before(since) {
			return c, true
		}
	}
	return claimRecord{}, false
}

func openLedger(t *testing.T) *recordingStore {
	t.Helper()
	st, err := ledger.Open(t.TempDir(), ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close(context.Background()) })
	return &recordingStore{Store: st}
}

// host is one Berth host of a test: its NATS connection, engine and Cluster.
type host struct {
	id  string
	nc  *nats.Conn
	eng *fakeEngine
	c   *Cluster
}

func connect(t *testing.T, urls string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(urls, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// startHost opens a Cluster as id on its own connection to urls.
func startHost(t *testing.T, urls, id string, st ledger.Store, opts Options) *host {
	t.Helper()
	nc := connect(t, urls)
	clk := opts.Clock
	if clk == nil {
		clk = clock.Real()
	}
	eng := newFakeEngine(clk.Now)
	opts.Host, opts.Ledger, opts.Engine, opts.Address = id, st, eng, "http://"+id+":8080"
	c, err := Open(t.Context(), nc, opts)
	if err != nil {
		t.Fatalf("open %s: %v", id, err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return &host{id: id, nc: nc, eng: eng, c: c}
}

// settled reports whether every partition of subs is worked on by exactly
// the host Assign gives it to over ids, and the ledger agrees.
func settled(t *testing.T, st ledger.Store, hosts []*host, subs []string, partitions int) error {
	t.Helper()
	ids := make([]string, len(hosts))
	for i, h := range hosts {
		ids[i] = h.id
	}
	for _, sub := range subs {
		want := Assign(sub, partitions, ids)
		got := make([]string, partitions)
		for _, h := range hosts {
			for _, p := range h.eng.owned(sub) {
				if got[p] != "" {
					// Two engines on one partition: not settled (yet).
					return fmt.Errorf("%s partition %d in the engines of %s and %s", sub, p, got[p], h.id)
				}
				got[p] = h.id
			}
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("%s in the engines of %q, want %q", sub, got, want)
		}
		owners := ledgerOwners(t, st, sub, partitions)
		for p, o := range owners {
			if o.host != want[p] {
				return fmt.Errorf("%s partition %d %q's in the ledger, want %q's", sub, p, o.host, want[p])
			}
		}
	}
	return nil
}

func ledgerOwners(t *testing.T, st ledger.Store, sub string, partitions int) []claim {
	t.Helper()
	out, err := readOwners(context.Background(), st, sub, partitions)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// interval is a span in which one host's engine worked on a partition.
type interval struct {
	host       string
	start, end time.Time // end zero: still working
	epoch      uint64    // a duty's: the claim its work ran under
}

// assertNoOverlap fails unless, for every partition of subs, the engines'
// logs show at most one host working on it at any time: each handover's stop
// returned before the next owner's start.
func assertNoOverlap(t *testing.T, hosts []*host, subs []string, partitions int) {
	t.Helper()
	for _, sub := range subs {
		for p := range partitions {
			var spans []interval
			for _, h := range hosts {
				h.eng.mu.Lock()
				var cur *interval
				for _, c := range h.eng.log {
					if c.sub != sub {
						continue
					}
					_, has := c.owned[p]
					switch {
					case has && cur == nil:
						cur = &interval{host: h.id, start: c.at}
					case !has && cur != nil:
						cur.end = c.at
						spans = append(spans, *cur)
						cur = nil
					}
				}
				if cur != nil {
					spans = append(spans, *cur)
				}
				h.eng.mu.Unlock()
			}
			slices.SortFunc(spans, func(a, b interval) int { return a.start.Compare(b.start) })
			for i := 1; i < len(spans); i++ {
				prev := spans[i-1]
				if prev.end.IsZero() || prev.end.After(spans[i].start) {
					t.Fatalf("%s partition %d: %s worked on it from %v to %v, %s started at %v",
						sub, p, prev.host, prev.start, prev.end, spans[i].host, spans[i].start)
				}
			}
		}
	}
}
