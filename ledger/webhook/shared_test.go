package webhook

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/berthhq/berth/ledger"
)

// runUntil runs d until the returned stop, which ends its context (not
// Close: the dispatcher may run again) and waits for Run to return.
func runUntil(t *testing.T, d *Dispatcher) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- d.Run(ctx) }()
	eventually(t, "Run to run", d.isRunning)
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
	eventually(t, "1 delivered by a", func() bool { return durableCursor(t, s, "h") == 1 })
	stopA()

	notify(t, s, note(EventParked, "S", "2"), note(EventParked, "S", "3"))
	stopB := runUntil(t, b)
	eventually(t, "2 and 3 delivered by b", func() bool { return durableCursor(t, s, "h") == 3 })
	stopB()

	notify(t, s, note(EventResumed, "S", "1"))
	stopA = runUntil(t, a)
	defer stopA()
	eventually(t, "4 delivered by a", func() bool { return durableCursor(t, s, "h") == 4 })
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

// TestFencedHandover: the webhooks duty moves to b while a, its old holder,
// still runs (the timing failed) and waits to try notification 2 again. b
// claims the duty and delivers 2 and 3; a's next attempt is refused by the
// ledger before it is sent, so a sends nothing more and its RunFenced
// returns ledger.ErrFenced. Each notification is delivered once.
func TestFencedHandover(t *testing.T) {
	clock := newClock()
	s := openStore(t, t.TempDir())
	rc := newReceiver(t, func(r received, nth int) answer {
		if nth == 2 { // a's first attempt at 2: a waits a second to try it again
			return answer{status: http.StatusServiceUnavailable}
		}
		return answer{status: http.StatusOK}
	})
	a, b := New(s, testOptions(t, clock, rc.hook("h"))), New(s, testOptions(t, clock, rc.hook("h")))
	notify(t, s, note(EventParked, "S", "1"), note(EventParked, "S", "2"), note(EventParked, "S", "3"))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	aDone, bDone := make(chan error, 1), make(chan error, 1)
	go func() { aDone <- a.RunFenced(ctx, claimDuty(t, s, "a")) }()
	eventually(t, "1 delivered by a, 2 refused", func() bool {
		return durableCursor(t, s, "h") == 1 && statsOf(a, "h").Attempts == 1
	})

	go func() { bDone <- b.RunFenced(ctx, claimDuty(t, s, "b")) }()
	eventually(t, "2 and 3 delivered by b", func() bool { return durableCursor(t, s, "h") == 3 })
	clock.Advance(2 * time.Second) // a's attempt at 2 is due
	select {
	case err := <-aDone:
		if !errors.Is(err, ledger.ErrFenced) {
			t.Fatalf("a's RunFenced = %v, want ledger.ErrFenced", err)
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
	cancel()
	if err := <-bDone; !errors.Is(err, context.Canceled) {
		t.Errorf("b's RunFenced = %v, want context.Canceled", err)
	}
}
