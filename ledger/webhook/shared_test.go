package webhook

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"testing"
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
