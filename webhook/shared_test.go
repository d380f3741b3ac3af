package webhook

import (
	"context"
	"errors"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/berthhq/berth/cluster/clustertest"
	"github.com/berthhq/berth/internal/clock"
	"github.com/berthhq/berth/internal/testing/natstest"
	"github.com/berthhq/berth/ledger"
)

// runUntil runs d until the returned stop, which ends its context (not
// Close: the dispatcher may run again) and waits for Run to return.
func runUntil(t *testing.T, d *Dispatcher) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- d.Run(ctx) }()
	checkfor.Eventually(t, d.runStarted)
	return func() {
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Errorf("Run = %v, want context.Canceled", err)
		}
	}
}

// TestRunAgainOnASharedLedger: two dispatchers on one ledger take turns, as
// the hosts of a cluster do when the webhooks duty moves: each Run goes on
// from the cursor the other stored, so nothing is sent twice, and no cursor
// goes back.
func TestRunAgainOnASharedLedger(t *testing.T) {
	clock := newClock()
	s := openStore(t, t.TempDir())
	rc := newReceiver(t, ok)
	// A hook that is down keeps every notification in the outbox, where a
	// dispatcher going on from a stale cursor would find them again.
	down := newReceiver(t, func(received, int) answer { return answer{status: http.StatusServiceUnavailable} })
	hooks := []Hook{rc.hook("h"), down.hook("down")}
	a, b := New(s, testOptions(t, clock, hooks...)), New(s, testOptions(t, clock, hooks...))

	notify(t, s, note(EventParked, "S", "1"))
	stopA := runUntil(t, a)
	checkfor.Eventually(t, func() error { return cursorAt(t, s, "h", 1) })
	stopA()

	notify(t, s, note(EventParked, "S", "2"), note(EventParked, "S", "3"))
	stopB := runUntil(t, b)
	checkfor.Eventually(t, func() error { return cursorAt(t, s, "h", 3) })
	stopB()

	notify(t, s, note(EventResumed, "S", "1"))
	stopA = runUntil(t, a)
	defer stopA()
	checkfor.Eventually(t, func() error { return cursorAt(t, s, "h", 4) })
	settles(t, a, "h", "nothing sent again", func() bool { return rc.count() == 4 })
	if got := rc.ids(); !slices.Equal(got, []string{"1", "2", "3", "4"}) {
		t.Fatalf("deliveries %v, want each notification once", got)
	}
	if n := len(queued(t, s)); n != 4 {
		t.Fatalf("%d notifications queued, want 4 (the down hook has had none)", n)
	}
}

// claimDuty claims the webhooks duty for host in s at the next epoch, as a
// cluster host does when its term starts.
func claimDuty(t *testing.T, s ledger.Store, host string) ledger.DutyFence {
	t.Helper()
	f, _, err := ledger.TakeDuty(context.Background(), s, "webhooks", host)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// refusingOnce is a receiver that refuses the second request (a's first
// attempt at notification 2, which a then waits a second to try again),
// and takes every other.
func refusingOnce(t *testing.T) *receiver {
	return newReceiver(t, func(_ received, nth int) answer {
		if nth == 2 {
			return answer{status: http.StatusServiceUnavailable}
		}
		return answer{status: http.StatusOK}
	})
}

// handOverMidStream queues notifications 1 to 3 for hook "h" of rc. Once
// a, running under the webhooks duty's claim (its run's error goes to
// aDone), has delivered 1 and waits to try 2 again, move hands the duty to
// b, which must then deliver 2 and 3. a's next attempt is due then: it
// checks that the ledger refuses it before it is sent, that a's run ends
// with ledger.ErrFenced, and that each notification was delivered once.
func handOverMidStream(t *testing.T, s ledger.Store, clock *clock.Fake, rc *receiver, a *Dispatcher, aDone <-chan error, move func()) {
	t.Helper()
	notify(t, s, note(EventParked, "S", "1"), note(EventParked, "S", "2"), note(EventParked, "S", "3"))
	checkfor.Eventually(t, func() error {
		return errors.Join(cursorAt(t, s, "h", 1), statsHold(a, "h", func(st HookStats) bool { return st.Attempts == 1 }))
	})
	move()
	checkfor.Eventually(t, func() error { return cursorAt(t, s, "h", 3) })
	clock.Advance(2 * time.Second) // a's attempt at 2 is due
	select {
	case err := <-aDone:
		if !errors.Is(err, ledger.ErrFenced) {
			t.Fatalf("a's run = %v, want ledger.ErrFenced", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a went on sending after the duty moved")
	}
	if got := rc.ids(); !slices.Equal(got, []string{"1", "2", "2", "3"}) {
		t.Fatalf("requests %v, want 1, 2 (refused), 2 and 3 once", got)
	}
	if st := statsOf(a, "h"); st.Delivered != 1 {
		t.Errorf("a delivered %d, want 1", st.Delivered)
	}
}

// TestFencedHandover: the webhooks duty moves (b claims it in the ledger
// and runs) while its old holder a still runs (the timing failed) and
// waits to try notification 2 again: a sends nothing more
// (handOverMidStream).
func TestFencedHandover(t *testing.T) {
	clock := newClock()
	s := openStore(t, t.TempDir())
	rc := refusingOnce(t)
	a, b := New(s, testOptions(t, clock, rc.hook("h"))), New(s, testOptions(t, clock, rc.hook("h")))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	aDone, bDone := make(chan error, 1), make(chan error, 1)
	go func() { aDone <- a.RunFenced(ctx, claimDuty(t, s, "a")) }()
	handOverMidStream(t, s, clock, rc, a, aDone, func() {
		go func() { bDone <- b.RunFenced(ctx, claimDuty(t, s, "b")) }()
	})
	cancel()
	if err := <-bDone; !errors.Is(err, context.Canceled) {
		t.Errorf("b's RunFenced = %v, want context.Canceled", err)
	}
}

// TestWebhooksDutyMovesMidStream: two hosts of a cluster (real leases on an
// in-process NATS server) stand for the webhooks duty over one ledger. The
// holder, a, waits to try notification 2 again when its clock stops and it
// is cut off: it goes on believing it holds the duty. b takes the duty over
// once a's lease ran out on the server and claims it at the next epoch; a
// sends nothing more (handOverMidStream).
func TestWebhooksDutyMovesMidStream(t *testing.T) {
	clock := newClock()
	s := openStore(t, t.TempDir())
	rc := refusingOnce(t)
	a, b := New(s, testOptions(t, clock, rc.hook("h"))), New(s, testOptions(t, clock, rc.hook("h")))
	aDone := make(chan error, 2)
	srv := natstest.RunServer(t)
	const ttl = 2 * time.Second
	clockA := clustertest.NewClock(t)
	ha := clustertest.Start(t, srv.URL(), "a", s, ttl, clockA)
	fa := clustertest.WaitHeld(t, ha.Stand(t, "webhooks", func(ctx context.Context, f ledger.DutyFence) {
		aDone <- a.RunFenced(ctx, f)
	}))
	hb := clustertest.Start(t, srv.URL(), "b", s, ttl, nil)
	db := hb.Stand(t, "webhooks", func(ctx context.Context, f ledger.DutyFence) { _ = b.RunFenced(ctx, f) })
	handOverMidStream(t, s, clock, rc, a, aDone, func() {
		clockA.Stop()
		ha.Cut()
		if fb := clustertest.WaitHeld(t, db); fb.Epoch != fa.Epoch+1 {
			t.Fatalf("b's claim %+v after a's %+v", fb, fa)
		}
	})
}
