package subscription

import (
	"context"
	"errors"
	"fmt"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"slices"
	"testing"
	"time"

	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/retry"
)

// waitingForLease waits until n handler calls of eng wait for the lease.
func waitingForLease(t *testing.T, eng *Engine, n int64) {
	t.Helper()
	checkfor.Eventually(t, func() error {
		if got := eng.LeaseStats().Waiting; got != n {
			return fmt.Errorf("%d calls wait for the lease, want %d", got, n)
		}
		return nil
	})
}

// The moment a host's lease may have run out, no handler call starts for
// any partition of any subscription — without a stop, a checkpoint or
// anything else first — and the calls wait, uncounted, until the lease is
// renewed.
func TestLeaseEndStopsEveryCallAtOnce(t *testing.T) {
	recA, recB := newRecorder(nil, nil), newRecorder(nil, nil)
	const other = "Other.onOrderShipped"
	opts := Options{Partitions: 2, CheckpointEvery: 1}
	e := newEnv(t, opts)
	recA.clock, recB.clock = e.clock, e.clock
	eng := e.host("A", opts, spec(sub, recA), Spec{Name: other, Processor: "Other", Handler: "onOrderShipped",
		Start: StartBeginning, Invoker: recB})
	eng.SetLease(e.clock.Now().Add(10 * time.Second))
	own(t, eng, e.claim("A", 1, 0, 1))
	if err := e.store.Update(context.Background(), func(tx ledger.Tx) error {
		return errors.Join(tx.ClaimPartition(other, 0, "A", 1), tx.ClaimPartition(other, 1, "A", 1))
	}); err != nil {
		t.Fatal(err)
	}
	if err := eng.Own(context.Background(), other, map[int]uint64{0: 1, 1: 1}); err != nil {
		t.Fatal(err)
	}
	e.append("Order", "o1")
	recA.waitHandled(t, "o1", 1)
	recB.waitHandled(t, "o1", 1)
	if !eng.LeaseValid() {
		t.Fatal("lease not valid before its end")
	}

	// The lease's end passes on the engine's clock; no timer needs to fire.
	e.clock.Advance(10 * time.Second)
	if eng.LeaseValid() {
		t.Fatal("lease valid at its end")
	}
	e.append("Order", "o1")
	waitingForLease(t, eng, 2) // one per subscription
	if got := len(recA.all()) + len(recB.all()); got != 2 {
		t.Fatalf("%d calls after the lease ended, want none: %+v %+v", got-2, recA.all(), recB.all())
	}
	if st := eng.LeaseStats(); st.Lapses != 1 {
		t.Fatalf("lease stats %+v, want one lapse", st)
	}

	// A renewal lets them go on, each call made once, in order.
	eng.SetLease(e.clock.Now().Add(10 * time.Second))
	for _, r := range []*recorder{recA, recB} {
		r.waitHandled(t, "o1", 2)
		if got := r.handled("o1"); !slices.Equal(got, seq(1, 2)) {
			t.Fatalf("o1 handled %v", got)
		}
		for _, c := range r.all() {
			if c.Attempt != 1 {
				t.Fatalf("a call waiting for the lease was counted as an attempt: %+v", r.all())
			}
		}
	}
	waitingForLease(t, eng, 0)
}

// A host woken after a pause longer than its lease (SIGSTOP, then SIGCONT)
// finishes the call it was in — the one call that may land twice — and
// starts no other: the check reads the clock, so it sees the pause at once.
// Giving the partitions up ends the waiting calls, uncounted, unparked,
// and the next owner delivers those events.
func TestLeaseSeenAfterAPauseBeforeAnyCall(t *testing.T) {
	entered, release := make(chan struct{}, 1), make(chan struct{})
	rec := newRecorder(nil, func(d Delivery, n int) *retry.Failure {
		if n == 1 {
			entered <- struct{}{}
			<-release
		}
		return nil
	})
	opts := Options{Partitions: 1, CheckpointEvery: 1}
	e := newEnv(t, opts)
	rec.clock = e.clock
	unblock := unblockAtEnd(t, release)
	a := e.host("A", opts, spec(sub, rec))
	a.SetLease(e.clock.Now().Add(6 * time.Second))
	own(t, a, e.claim("A", 1, 0))
	e.append("Order", "o1")
	e.append("Order", "o1")
	recv(t, entered, "the first call")

	// Paused for 3 TTLs in the middle of the call.
	e.clock.Advance(18 * time.Second)
	unblock()
	waitingForLease(t, a, 1)
	if got := rec.of("o1"); len(got) != 1 || got[0].Version != 1 {
		t.Fatalf("calls after waking: %+v", got)
	}

	// The cluster gives the partition up; another host claims and delivers.
	own(t, a, map[int]uint64{})
	waitingForLease(t, a, 0)
	recB := newRecorder(e.clock, nil)
	b := e.host("B", opts, spec(sub, recB))
	own(t, b, e.claim("B", 2, 0))
	recB.waitHandled(t, "o1", 1)
	if got := recB.handled("o1"); got[0] != 2 {
		t.Fatalf("the next owner handled %v, want from version 2", got)
	}
	if got := rec.of("o1"); len(got) != 1 {
		t.Fatalf("the paused host called again: %+v", got)
	}
	st, err := b.Status(context.Background(), sub)
	if err != nil {
		t.Fatal(err)
	}
	for state, n := range st.Parked {
		if n != 0 {
			t.Fatalf("%d parked %s after the handover", n, state)
		}
	}
}
