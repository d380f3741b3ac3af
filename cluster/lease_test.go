package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/clock"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/internal/testing/natstest"
	"github.com/nats-io/nats.go/jetstream"
)

var start = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// aloneOnFakeClock starts one host on a fake clock with a 10 s lease (the
// server's own TTL never passes in these tests) and waits until it owns all
// 16 partitions of "orders".
func aloneOnFakeClock(t *testing.T) (*natstest.Node, *clock.Fake, *recordingStore, *host) {
	t.Helper()
	n := natstest.RunServer(t)
	clock := clock.NewFake(start)
	st := openLedger(t)
	h := startHost(t, n.URL(), "solo", st, Options{Subscriptions: []string{"orders"}, LeaseTTL: 10 * time.Second, Clock: clock})
	checkfor.Nil(t, 5*time.Second, 10*time.Millisecond, func() error { return ownsAll(h) })
	// The lease waits for its next renewal.
	if err := clock.BlockUntil(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	return n, clock, st, h
}

// ownsAll says how many partitions of "orders" h's engine works on, until
// it works on all of them; nil then.
func ownsAll(h *host) error {
	if o := h.eng.owned("orders"); len(o) != partitions {
		return fmt.Errorf("the engine on orders partitions %v, want all %d", o, partitions)
	}
	return nil
}

// TestGiveUpAtDeadline: a host that cannot renew works on until TTL -
// Margin (8 s of 10) after it sent its last confirmed write, by its own
// clock, and not a moment longer.
func TestGiveUpAtDeadline(t *testing.T) {
	_, clock, _, h := aloneOnFakeClock(t)
	h.nc.Close() // every renewal fails from now on
	clock.Advance(8*time.Second - time.Millisecond)
	checkfor.Nil(t, 5*time.Second, 5*time.Millisecond, func() error {
		if s := h.c.Stats(); s.RenewalFailures < 1 {
			return fmt.Errorf("no failed renewal yet: %+v", s)
		}
		return nil
	})
	if err := clock.BlockUntil(t.Context(), 1); err != nil { // waiting to retry
		t.Fatal(err)
	}
	if s := h.c.Stats(); s.GiveUps != 0 || h.eng.total() != partitions {
		t.Fatalf("gave up before the deadline: %+v, engine owns %d", s, h.eng.total())
	}
	clock.Advance(time.Millisecond)
	checkfor.Nil(t, 5*time.Second, 5*time.Millisecond, func() error {
		if n := h.eng.total(); n != 0 {
			return fmt.Errorf("the engine still on %d partitions", n)
		}
		return nil
	})
	if s := h.c.Stats(); s.GiveUps != 1 || s.Releases != 0 {
		t.Fatalf("stats %+v", s)
	}
	if at := h.eng.stoppedAt("orders", 0); !at.Equal(start.Add(8 * time.Second)) {
		t.Fatalf("stopped at %v, want the deadline %v", at, start.Add(8*time.Second))
	}
}

// TestRenewalExtends: each confirmed renewal moves the deadline to 8 s
// after it was sent, so a host renewing on time never gives up.
func TestRenewalExtends(t *testing.T) {
	_, clock, _, h := aloneOnFakeClock(t)
	for i := range 5 {
		renewals := h.c.Stats().Renewals
		clock.Advance(10 * time.Second / 3)
		checkfor.Nil(t, 5*time.Second, 5*time.Millisecond, func() error {
			if s := h.c.Stats(); s.Renewals <= renewals {
				return fmt.Errorf("no renewal after the %dth: %+v", renewals, s)
			}
			return nil
		})
		if err := clock.BlockUntil(t.Context(), 1); err != nil {
			t.Fatal(err)
		}
		if s := h.c.Stats(); s.GiveUps != 0 || h.eng.total() != partitions {
			t.Fatalf("renewal %d: %+v, engine owns %d", i, s, h.eng.total())
		}
	}
	if ms := h.c.Members(); len(ms) != 1 || !ms[0].Self || ms[0].LeaseAge != 0 {
		t.Fatalf("members %+v", ms)
	}
}

// TestLeaseLostRejoins: a key that vanishes under its host (deleted here,
// as an expiry the host slept through would leave it) makes the host give
// up at once, join again as a new incarnation and claim its partitions at
// the next epoch.
func TestLeaseLostRejoins(t *testing.T) {
	n, clock, st, h := aloneOnFakeClock(t)
	before := h.c.Owned()["orders"]
	kv := bucket(t, n.URL())
	if err := kv.Delete(t.Context(), "solo"); err != nil {
		t.Fatal(err)
	}
	checkfor.Nil(t, 5*time.Second, 5*time.Millisecond, func() error {
		if s := h.c.Stats(); s.LeasesLost != 1 || s.GiveUps != 1 {
			return fmt.Errorf("the lease not found lost and given up once: %+v", s)
		}
		return nil
	})
	if err := clock.BlockUntil(t.Context(), 1); err != nil { // waiting to join again
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	checkfor.Nil(t, 5*time.Second, 5*time.Millisecond, func() error { return ownsAll(h) })
	owners := ledgerOwners(t, st, "orders", partitions)
	for p, e := range h.c.Owned()["orders"] {
		if e != before[p]+1 || owners[p] != (claim{"solo", e}) {
			t.Fatalf("partition %d: epoch %d (was %d), ledger %+v", p, e, before[p], owners[p])
		}
	}
}

func bucket(t *testing.T, url string) jetstream.KeyValue {
	t.Helper()
	js, err := jetstream.New(connect(t, url))
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(t.Context(), DefaultBucket)
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// TestOpenDuplicateHost: a second process with a live host's id waits a
// TTL (a killed previous run's key would expire by then) and is refused.
func TestOpenDuplicateHost(t *testing.T) {
	n, _, st, _ := aloneOnFakeClock(t)
	clock := clock.NewFake(start)
	var err error
	opened, done := context.WithCancel(t.Context())
	nc := connect(t, n.URL())
	go func() {
		defer done()
		_, err = Open(t.Context(), nc, Options{Host: "solo", Ledger: st, Engine: newFakeEngine(clock.Now),
			LeaseTTL: 10 * time.Second, Clock: clock})
	}()
	waited := time.Duration(0)
	for clock.BlockUntil(opened, 1) == nil { // Open waits to try again
		clock.Advance(time.Second)
		waited += time.Second
	}
	<-opened.Done()
	if !errors.Is(err, errInUse) || !strings.Contains(err.Error(), `"solo" is a live member`) {
		t.Fatalf("a second solo: %v", err)
	}
	if waited < 10*time.Second {
		t.Fatalf("refused after %v, before a TTL", waited)
	}
}

// TestOpenResumesItsPreviousRun: a host whose previous run stopped without
// leaving (its connection gone: a crash, a power cut) takes its key over at
// once when it says which incarnation that run was (Options.Resume, kept
// beside its data), instead of waiting out the TTL as TestOpenDuplicateHost
// does; it then owns every partition again, and Joined tells the new
// incarnation.
func TestOpenResumesItsPreviousRun(t *testing.T) {
	n := natstest.RunServer(t)
	st := openLedger(t)
	var mu sync.Mutex
	var incarnations []string
	joined := func(inc string) { mu.Lock(); incarnations = append(incarnations, inc); mu.Unlock() }
	first := startHost(t, n.URL(), "solo", st, Options{Subscriptions: []string{"orders"}, LeaseTTL: 10 * time.Second,
		Clock: clock.NewFake(start), Joined: joined})
	checkfor.Nil(t, 5*time.Second, 10*time.Millisecond, func() error { return ownsAll(first) })
	first.nc.Close() // no goodbye: its key lives on for the TTL
	mu.Lock()
	previous := incarnations[0]
	mu.Unlock()

	// On a clock that never moves: the TTL cannot pass, so only a take-over
	// lets it open (within 10 s of real time, or the test fails).
	clk := clock.NewFake(start)
	eng := newFakeEngine(clk.Now)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	second, err := Open(ctx, connect(t, n.URL()), Options{Host: "solo", Address: "http://solo:8080", Ledger: st, Engine: eng,
		Subscriptions: []string{"orders"}, LeaseTTL: 10 * time.Second, Clock: clk, Resume: previous, Joined: joined})
	if err != nil {
		t.Fatalf("the second run: %v", err)
	}
	t.Cleanup(func() { second.Close(context.Background()) })
	checkfor.Nil(t, 5*time.Second, 10*time.Millisecond, func() error { return ownsAll(&host{eng: eng}) })
	mu.Lock()
	defer mu.Unlock()
	if len(incarnations) != 2 || incarnations[1] == previous {
		t.Fatalf("incarnations joined %q, want a new one after %q", incarnations, previous)
	}
}

// TestOpenBadOptions: each problem is named, before anything is written.
func TestOpenBadOptions(t *testing.T) {
	st := openLedger(t)
	eng := newFakeEngine(time.Now)
	for _, c := range []struct {
		name string
		opts Options
		want string
	}{
		{"no host", Options{Ledger: st, Engine: eng}, `host id ""`},
		{"a dot in the host", Options{Host: "a.b", Ledger: st, Engine: eng}, `host id "a.b"`},
		{"a colon in the host", Options{Host: "released:a", Ledger: st, Engine: eng}, `host id "released:a"`},
		{"no ledger", Options{Host: "a", Engine: eng}, "no ledger"},
		{"no engine", Options{Host: "a", Ledger: st}, "no engine"},
		{"short TTL", Options{Host: "a", Ledger: st, Engine: eng, LeaseTTL: 500 * time.Millisecond}, "lease TTL 500ms is under 1s"},
		{"wide margin", Options{Host: "a", Ledger: st, Engine: eng, LeaseTTL: 4 * time.Second, Margin: 3 * time.Second}, "margin 3s"},
		{"replicas", Options{Host: "a", Ledger: st, Engine: eng, Replicas: 7}, "7 replicas"},
		{"empty subscription", Options{Host: "a", Ledger: st, Engine: eng, Subscriptions: []string{""}}, "empty subscription"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Open(t.Context(), nil, c.opts)
			if !errors.Is(err, errOptions) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Open: %v, want an options error with %q", err, c.want)
			}
		})
	}
}

// TestOpenTTLMismatch: hosts of one deployment must agree on the lease TTL,
// which is the bucket's; a host configured otherwise is refused, naming both.
func TestOpenTTLMismatch(t *testing.T) {
	n := natstest.RunServer(t)
	st := openLedger(t)
	startHost(t, n.URL(), "a", st, Options{LeaseTTL: 10 * time.Second})
	_, err := Open(t.Context(), connect(t, n.URL()), Options{Host: "b", Ledger: st, Engine: newFakeEngine(time.Now), LeaseTTL: 5 * time.Second})
	if !errors.Is(err, errOptions) || !strings.Contains(err.Error(), "lease TTL 5s, but membership bucket \"berth_members\" has 10s") {
		t.Fatalf("Open: %v", err)
	}
}

// TestJoinTakesOverItsOwnUnansweredCreate: a join whose create got no
// answer (a NATS cluster still forming) may have landed, so the next join
// takes the key over from that incarnation — and from no other, which
// stays a live member.
func TestJoinTakesOverItsOwnUnansweredCreate(t *testing.T) {
	n := natstest.RunServer(t)
	js, err := jetstream.New(connect(t, n.URL()))
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: "T_JOIN"})
	if err != nil {
		t.Fatal(err)
	}
	o := Options{LeaseTTL: 10 * time.Second, Clock: clock.NewFake(start)}
	for _, tc := range []struct {
		unsure, stored string
		want           error
	}{
		{unsure: "landed", stored: "landed"},
		{unsure: "landed", stored: "another", want: errInUse},
		{unsure: "", stored: "another", want: errInUse},
	} {
		key := "h-" + tc.unsure + "-" + tc.stored
		if _, err := kv.Create(t.Context(), key, memberInfo{Incarnation: tc.stored}.encode()); err != nil {
			t.Fatal(err)
		}
		l := newLease(kv, key, &o, memberInfo{}, &counters{}, time.Second)
		l.unsure = tc.unsure
		err := l.join(t.Context())
		if !errors.Is(err, tc.want) {
			t.Errorf("unsure %q, stored %q: join %v, want %v", tc.unsure, tc.stored, err, tc.want)
			continue
		}
		if err == nil {
			e, err := kv.Get(t.Context(), key)
			if err != nil {
				t.Fatal(err)
			}
			if m, _ := decodeMember(e.Value()); m.Incarnation != l.info.Incarnation || l.unsure != "" {
				t.Errorf("after the take-over: key holds %q, want the join's %q; unsure %q", m.Incarnation, l.info.Incarnation, l.unsure)
			}
		}
	}
}
