package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/jobs"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/subscription"
	"github.com/nats-io/nats.go"
)

// A Forwarder is what bulk jobs act through on a host of a cluster.
var _ jobs.Engine = (*Forwarder)(nil)

// TestResumeOnAnotherHost: an aggregate parked on host B, resumed through
// host A (whose engine does not own it: ErrNotOwned), resumes on B — the
// caller gets nil, B replays the parked event and the one it held, A
// handles nothing of it, and the record's history names the actor.
func TestResumeOnAnotherHost(t *testing.T) {
	onEveryLedger(t, func(t *testing.T, e *opsEnv) {
		hs := e.hosts("A", "B")
		a, b := hs[0], hs[1]
		id := e.parkedOn(b)
		if err := a.eng.Resume(t.Context(), opsSub, "Order", id, subscription.Caller{Actor: "ops", Reason: "fixed"}); !errors.Is(err, subscription.ErrNotOwned) {
			t.Fatalf("A's engine resumed an aggregate of B's: %v", err)
		}
		e.broken.Store(false)
		if err := a.fwd.Resume(t.Context(), opsSub, "Order", id, subscription.Caller{Actor: "ops", Reason: "fixed"}); err != nil {
			t.Fatalf("resume through A: %v", err)
		}
		e.waitHandled("B", id, 1, 2)
		if got := e.handledBy("A", id); len(got) != 0 {
			t.Fatalf("A handled %v", got)
		}
		// A resume again finds it resuming or resumed, as on one host.
		if err := a.fwd.Resume(t.Context(), opsSub, "Order", id, subscription.Caller{Actor: "ops", Reason: "again"}); !errors.Is(err, subscription.ErrNotParked) {
			t.Fatalf("resume of a resumed aggregate: %v", err)
		}
	})
}

// TestForwardedErrors: the errors of a skip or resume made through A on an
// aggregate of B's are B's own — the same sentinel and message as the call
// made on B — and change nothing.
func TestForwardedErrors(t *testing.T) {
	onEveryLedger(t, func(t *testing.T, e *opsEnv) {
		hs := e.hosts("A", "B")
		a, b := hs[0], hs[1]
		parked, other := e.aggregateOn(b, "bad-"), e.aggregateOn(b, "good-")
		e.append(parked)
		e.append(other)
		before := e.waitParked(parked)
		e.waitHandled("B", other, 1)

		cases := []struct {
			name   string
			call   func(subscription.Operator) error
			wantIs error
		}{
			{"skip past the head", func(o subscription.Operator) error {
				return o.Skip(t.Context(), opsSub, "Order", parked, 9, subscription.Caller{Actor: "ops", Reason: ""})
			}, subscription.ErrBadVersion},
			{"resume of an aggregate not parked", func(o subscription.Operator) error {
				return o.Resume(t.Context(), opsSub, "Order", other, subscription.Caller{Actor: "ops", Reason: ""})
			}, subscription.ErrNotParked},
			{"skip of an aggregate not parked", func(o subscription.Operator) error {
				return o.Skip(t.Context(), opsSub, "Order", other, 0, subscription.Caller{Actor: "ops", Reason: ""})
			}, subscription.ErrNotParked},
			{"unknown subscription", func(o subscription.Operator) error {
				return o.Resume(t.Context(), "ordres", "Order", parked, subscription.Caller{Actor: "ops", Reason: ""})
			}, subscription.ErrUnknownSubscription},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				got, want := c.call(a.fwd), c.call(b.eng)
				if !errors.Is(got, c.wantIs) || !errors.Is(want, c.wantIs) {
					t.Fatalf("through A: %v; on B: %v; want %v", got, want, c.wantIs)
				}
				if got.Error() != want.Error() {
					t.Fatalf("through A %q, on B %q", got, want)
				}
			})
		}
		after := e.waitParked(parked)
		if len(after.History) != len(before.History) || after.Version != before.Version {
			t.Fatalf("the record changed: %+v, was %+v", after, before)
		}
	})
}

// TestOwnerUnreachable: when the owner's host does not answer, a resume
// through A ends within its bounds with ErrUnreachable rather than hanging:
// at once (after its tries) when nothing listens for the owner, at the
// call's deadline when the owner takes the call and never answers.
func TestOwnerUnreachable(t *testing.T) {
	onEveryLedger(t, func(t *testing.T, e *opsEnv) {
		hs := e.hosts("A", "B")
		a, b := hs[0], hs[1]
		id := e.aggregateOn(b, "bad-")
		e.append(id)
		e.waitParked(id)
		if err := b.fwd.Close(); err != nil { // B stops answering; the ledger still names it the owner
			t.Fatal(err)
		}
		start := time.Now()
		err := a.fwd.Resume(t.Context(), opsSub, "Order", id, subscription.Caller{Actor: "ops", Reason: ""})
		if !errors.Is(err, ErrUnreachable) {
			t.Fatalf("resume with its owner gone: %v", err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("took %v, more than the call's wait", d)
		}

		// B takes the call and hangs.
		hang := make(chan *nats.Msg, 1)
		silent := connect(t, e.node.URL())
		s, err := silent.ChanSubscribe(opsDeployment+opsSuffix+".B", hang)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Unsubscribe()
		if err := silent.Flush(); err != nil { // the server has the subscription
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		defer cancel()
		start = time.Now()
		err = a.fwd.Resume(ctx, opsSub, "Order", id, subscription.Caller{Actor: "ops", Reason: ""})
		if !errors.Is(err, ErrUnreachable) {
			t.Fatalf("resume with its owner hanging: %v", err)
		}
		if d := time.Since(start); d < 400*time.Millisecond || d > 1500*time.Millisecond {
			t.Fatalf("took %v, want about the call's 500ms deadline", d)
		}
		if m := <-hang; m.Reply == "" {
			t.Fatal("the owner got no call to answer")
		}
		if rec := e.waitParked(id); rec.State != ledger.StateWaiting {
			t.Fatalf("record %+v", rec)
		}
	})
}

// TestPauseEverywhere: a pause made on A is in force on B when it returns
// (B delivers nothing more of its partitions), a host that starts later
// starts paused (it reads the ledger), a pause until reaches B with its end,
// and an unpause on A lets B deliver what came meanwhile.
func TestPauseEverywhere(t *testing.T) {
	onEveryLedger(t, func(t *testing.T, e *opsEnv) {
		hs := e.hosts("A", "B")
		a, b := hs[0], hs[1]
		id := e.aggregateOn(b, "good-")
		e.append(id)
		e.waitHandled("B", id, 1)

		if err := a.fwd.Pause(t.Context(), opsSub, subscription.Caller{}); err != nil {
			t.Fatal(err)
		}
		for _, h := range hs {
			if st := state(t, h); st.State != subscription.StatePaused {
				t.Fatalf("%s after the pause: %s", h.id, st.State)
			}
		}
		e.append(id)
		late := &opsHost{id: "C"}
		late.eng, _ = e.engine("C") // owns nothing: it only reads the pause
		if st := state(t, late); st.State != subscription.StatePaused {
			t.Fatalf("a host started after the pause: %s", st.State)
		}

		until := time.Now().Add(time.Hour).Truncate(time.Second)
		if err := a.fwd.PauseUntil(t.Context(), opsSub, until, subscription.Caller{}); err != nil {
			t.Fatal(err)
		}
		if st := state(t, b); st.State != subscription.StatePaused || !st.PausedUntil.Equal(until) {
			t.Fatalf("B after a pause until %v: %s until %v", until, st.State, st.PausedUntil)
		}
		if got := e.handledBy("B", id); len(got) != 1 {
			t.Fatalf("B handled %v while paused", got)
		}

		if err := a.fwd.Unpause(t.Context(), opsSub, subscription.Caller{}); err != nil {
			t.Fatal(err)
		}
		if st := state(t, b); st.State != subscription.StateRunning {
			t.Fatalf("B after the unpause: %s", st.State)
		}
		e.waitHandled("B", id, 1, 2)

		// Each change is notified once, by the host it was made on, not
		// once per host that applied it.
		want := []string{ledger.NotifySubscriptionPaused, ledger.NotifySubscriptionPaused, ledger.NotifySubscriptionUnpaused}
		var got []string
		checkfor.Nil(t, 5*time.Second, 10*time.Millisecond, func() error {
			got = nil
			if err := e.st.View(t.Context(), func(tx ledger.Tx) error {
				ns, err := tx.Notifications(0, 100)
				for _, n := range ns {
					got = append(got, n.Type)
				}
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if len(got) < len(want) {
				return fmt.Errorf("notifications %v, want %v", got, want)
			}
			return nil
		})
		if !slices.Equal(got, want) {
			t.Errorf("notifications %v, want %v", got, want)
		}
	})
}

// TestResetEverywhere: a reset made on A moves every partition's
// checkpoint, B's too, with OnReset run once: both hosts deliver their
// aggregates' events again from the start, each aggregate still on its
// owner, and go on with new events.
func TestResetEverywhere(t *testing.T) {
	onEveryLedger(t, func(t *testing.T, e *opsEnv) {
		hs := e.hosts("A", "B")
		a, b := hs[0], hs[1]
		onA, onB := e.aggregateOn(a, "good-"), e.aggregateOn(b, "good-")
		for _, id := range []string{onA, onB, onA, onB} {
			e.append(id)
		}
		e.waitHandled("A", onA, 1, 2)
		e.waitHandled("B", onB, 1, 2)
		checkfor.Nil(t, 5*time.Second, 10*time.Millisecond, func() error {
			if st := state(t, b); st.DurableCheckpoint != st.Head+1 {
				return fmt.Errorf("B's durable checkpoint %d, head %d", st.DurableCheckpoint, st.Head)
			}
			return nil
		})

		if err := a.fwd.Reset(t.Context(), opsSub, 1, subscription.Caller{}); err != nil {
			t.Fatal(err)
		}
		if n := e.resets.Load(); n != 1 {
			t.Fatalf("OnReset ran %d times", n)
		}
		e.waitHandled("A", onA, 1, 2, 1, 2)
		e.waitHandled("B", onB, 1, 2, 1, 2)
		e.append(onB)
		e.waitHandled("B", onB, 1, 2, 1, 2, 3)
		for _, h := range hs {
			if st := state(t, h); st.State != subscription.StateRunning {
				t.Fatalf("%s after the reset: %s", h.id, st.State)
			}
		}

		if err := a.fwd.Reset(t.Context(), opsSub, 99, subscription.Caller{}); !errors.Is(err, subscription.ErrBadPosition) {
			t.Fatalf("reset beyond the head: %v", err)
		}
	})
}

// TestResetRefusedWhenAnOwnerDoesNotHold: a host that owns partitions but
// does not answer (here, one without a Forwarder) makes a reset fail with
// ErrUnconfirmed and change nothing: no checkpoint moved, OnReset did not
// run, and every host goes on delivering.
func TestResetRefusedWhenAnOwnerDoesNotHold(t *testing.T) {
	onEveryLedger(t, func(t *testing.T, e *opsEnv) {
		a, b := e.host("A", true), e.host("B", true)
		c := e.host("C", false)
		hs := []*opsHost{a, b, c}
		e.waitSplit(hs)
		onC := e.aggregateOn(c, "good-")
		e.append(onC)
		e.waitHandled("C", onC, 1)

		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		defer cancel()
		err := a.fwd.Reset(ctx, opsSub, 1, subscription.Caller{})
		if !errors.Is(err, ErrUnconfirmed) {
			t.Fatalf("reset with a silent owner: %v", err)
		}
		if n := e.resets.Load(); n != 0 {
			t.Fatalf("OnReset ran %d times", n)
		}
		onA, onB := e.aggregateOn(a, "good-"), e.aggregateOn(b, "good-")
		for _, id := range []string{onA, onB, onC} {
			e.append(id)
		}
		e.waitHandled("A", onA, 1)
		e.waitHandled("B", onB, 1)
		e.waitHandled("C", onC, 1, 2)
	})
}

// TestSkipOnAnotherHost: a skip through A of an aggregate parked on B moves
// it past the event it stopped at on B; B delivers the later event only.
func TestSkipOnAnotherHost(t *testing.T) {
	onEveryLedger(t, func(t *testing.T, e *opsEnv) {
		hs := e.hosts("A", "B")
		a, b := hs[0], hs[1]
		id := e.parkedOn(b)
		e.broken.Store(false)
		if err := a.fwd.Skip(t.Context(), opsSub, "Order", id, 1, subscription.Caller{Actor: "ops", Reason: "bad data"}); err != nil {
			t.Fatalf("skip through A: %v", err)
		}
		e.waitHandled("B", id, 2)
		if got := e.handledBy("A", id); len(got) != 0 {
			t.Fatalf("A handled %v", got)
		}
	})
}

// TestHoldExpires: a host held for a reset whose resetter never lifts the
// hold (it died) starts its run again by itself when the hold ends.
func TestHoldExpires(t *testing.T) {
	onEveryLedger(t, func(t *testing.T, e *opsEnv) {
		hs := e.hosts("A", "B")
		b := hs[1]
		id := e.aggregateOn(b, "good-")
		nc := connect(t, e.node.URL())
		m, err := nc.Request(opsDeployment+opsSuffix+".B",
			encodeCall(opCall{Op: opHold, Subscription: opsSub, Hold: "gone-1", WaitMS: 300}), 2*time.Second)
		if err != nil || replyError(m) != nil {
			t.Fatalf("hold: %v %v", err, replyError(m))
		}
		if st := state(t, b); st.State != subscription.StateStopped {
			t.Fatalf("B while held: %s", st.State)
		}
		e.append(id)
		e.waitHandled("B", id, 1) // only once the hold ended
		if st := state(t, b); st.State != subscription.StateRunning {
			t.Fatalf("B after the hold: %s", st.State)
		}
	})
}
