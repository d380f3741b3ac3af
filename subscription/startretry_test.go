package subscription

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berthhq/berth/eventlog"
)

// awayLog is a real log whose Head fails while away is set: a fault
// injected where a start reads first, as a NATS stream electing its leader
// answers nobody for a moment.
type awayLog struct {
	eventlog.Log
	away  atomic.Bool
	heads atomic.Int32 // Head calls that failed
}

var errAway = errors.New("injected: the event log does not answer")

func (l *awayLog) Head(ctx context.Context) (uint64, error) {
	if l.away.Load() {
		l.heads.Add(1)
		return 0, errAway
	}
	return l.Log.Head(ctx)
}

// startStateOf returns the subscription's status on eng; the log
// must answer.
func startStateOf(t *testing.T, eng *Engine) Status {
	t.Helper()
	st, err := eng.Status(context.Background(), sub)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// A first start whose log does not answer does not fail the engine's
// Start: it is tried again on the engine's clock, after 375 ms and then
// 750 ms (StartBackoff 500 ms doubled, with the test's jitter of 0.5),
// while Status says starting with the last error; the try after the log is
// back starts the run, and delivery goes on from the beginning.
func TestFirstStartTriedAgainUntilTheLogAnswers(t *testing.T) {
	rec := newRecorder(nil, nil)
	e := newEnv(t, Options{Partitions: 2}, spec(sub, rec))
	rec.clock = e.clock
	away := &awayLog{Log: e.log}
	away.away.Store(true)
	e.events = away
	e.append("Order", "a")
	e.start() // fails the test if Start fails
	if d := e.advance(); d != 375*time.Millisecond {
		t.Fatalf("first retry after %v, want 375ms", d)
	}
	e.blockUntil(1) // the second try failed too, and waits
	if d, _ := e.clock.NextFire(); d != 750*time.Millisecond {
		t.Fatalf("second retry after %v, want 750ms", d)
	}
	if n := away.heads.Load(); n != 2 {
		t.Fatalf("%d failed reads of the head, want 2", n)
	}
	if got := rec.all(); len(got) != 0 {
		t.Fatalf("delivered while not started: %+v", got)
	}
	away.away.Store(false) // Status reads the head too
	st := startStateOf(t, e.eng)
	if st.State != StateStarting || !strings.Contains(st.StartError, errAway.Error()) || st.StartFailures != 2 || len(st.Partitions) != 0 {
		t.Fatalf("status %+v, want starting with the injected error after 2 failures", st)
	}
	e.append("Order", "a")
	e.advance()
	rec.waitHandled(t, "a", 2)
	st = e.waitIdle(sub)
	if st.State != StateRunning || st.StartError != "" || st.StartFailures != 2 || len(st.Partitions) != 2 {
		t.Fatalf("status %+v, want running after 2 failures", st)
	}
	if n := e.clock.Waiters(); n != 0 {
		t.Fatalf("%d timers left waiting after the start", n)
	}
}

// On a host among several, a restart by Own whose log does not answer
// (the lease term ended during a NATS leader election) leaves the
// subscription starting, not stopped: Own does not fail for it, a later
// Own while it is starting changes the set the retry starts, and the retry
// delivers that set's partitions from their checkpoints once the log is
// back.
func TestOwnRestartTriedAgain(t *testing.T) {
	const parts = 2
	rec := newRecorder(nil, nil)
	opts := Options{Partitions: parts}
	e := newEnv(t, opts)
	rec.clock = e.clock
	away := &awayLog{Log: e.log}
	e.events = away
	a := e.host("A", opts, spec(sub, rec))
	own(t, a, e.claim("A", 1, 0, 1))
	ids := []string{idsIn(0, parts, 1, "p")[0], idsIn(1, parts, 1, "q")[0]}
	for _, id := range ids {
		e.append("Order", id)
		rec.waitHandled(t, id, 1)
	}
	away.away.Store(true)
	own(t, a, e.claim("A", 2, 0, 1)) // fails the test if Own fails
	e.blockUntil(1)
	own(t, a, e.claim("A", 3, 1)) // partition 0 went to another host meanwhile
	e.advance()                   // still away
	e.blockUntil(1)
	away.away.Store(false)
	st, err := a.Status(context.Background(), sub)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != StateStarting || st.StartFailures != 3 || !strings.Contains(st.StartError, errAway.Error()) {
		t.Fatalf("status %+v, want starting after 3 failures (both Owns' and the retry's)", st)
	}
	for _, id := range ids {
		e.append("Order", id)
	}
	e.advance()
	rec.waitHandled(t, ids[1], 2)
	st, err = a.Status(context.Background(), sub)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != StateRunning || len(st.Partitions) != 1 || st.Partitions[0].Index != 1 || st.Partitions[0].Epoch != 3 {
		t.Fatalf("status %+v, want running partition 1 at epoch 3", st)
	}
	if got := rec.handled(ids[0]); len(got) != 1 {
		t.Fatalf("%s (partition 0, no longer owned) handled %v", ids[0], got)
	}
}

// A hold taken while a start is being tried again ends the retry (the
// reset needs it stopped); lifting it starts the run, and a reset while
// starting is written and starts it too.
func TestHoldAndResetWhileStarting(t *testing.T) {
	rec := newRecorder(nil, nil)
	e := newEnv(t, Options{Partitions: 1}, spec(sub, rec))
	rec.clock = e.clock
	away := &awayLog{Log: e.log}
	e.events = away
	e.start()
	e.append("Order", "a")
	rec.waitHandled(t, "a", 1)
	away.away.Store(true)
	if err := e.eng.Hold(context.Background(), sub, "h1"); err != nil {
		t.Fatal(err)
	}
	if err := e.eng.Unhold(context.Background(), sub, "h1"); err != nil {
		t.Fatalf("Unhold failed for a start that is tried again: %v", err)
	}
	e.blockUntil(1)
	if err := e.eng.Hold(context.Background(), sub, "h2"); err != nil {
		t.Fatalf("hold while starting: %v", err)
	}
	e.advance() // the ended retry wakes and does nothing
	away.away.Store(false)
	if st := startStateOf(t, e.eng); st.State != StateStopped || st.StartError != "" {
		t.Fatalf("held: status %+v, want stopped", st)
	}
	away.away.Store(true)
	if err := e.eng.Unhold(context.Background(), sub, "h2"); err != nil {
		t.Fatal(err)
	}
	e.blockUntil(1)
	away.away.Store(false)
	// Reset's own check of the position reads the head: the log answers
	// it, and the start after the reset is the retry's.
	if err := e.eng.Reset(context.Background(), sub, 1, Caller{}); err != nil {
		t.Fatalf("reset while starting: %v", err)
	}
	rec.waitHandled(t, "a", 2) // delivered again from the reset's position
	if st := e.waitIdle(sub); st.State != StateRunning {
		t.Fatalf("status %+v", st)
	}
}

// Closing the engine while a start is being tried again ends the retry at
// once; nothing is started after Close.
func TestCloseWhileStarting(t *testing.T) {
	e := newEnv(t, Options{}, spec(sub, newRecorder(nil, nil)))
	away := &awayLog{Log: e.log}
	away.away.Store(true)
	e.events = away
	eng := e.start()
	e.blockUntil(1)
	closeWithin(t, eng)
	e.eng = nil
	if n := e.clock.Waiters(); n != 0 {
		t.Fatalf("%d timers still waiting after Close", n)
	}
	away.away.Store(false)
	if st := startStateOf(t, eng); st.State != StateStopped {
		t.Fatalf("after Close: status %+v", st)
	}
}

// A new set of partitions given while a start is being tried again is
// tried at once, not at the retry's next try (up to StartBackoffMax away):
// after a network fault heals, the partitions the cluster claims back run
// as soon as the log answers.
func TestOwnDuringStartRetryTriesAtOnce(t *testing.T) {
	rec := newRecorder(nil, nil)
	opts := Options{Partitions: 2}
	e := newEnv(t, opts)
	rec.clock = e.clock
	away := &awayLog{Log: e.log}
	e.events = away
	a := e.host("A", opts, spec(sub, rec))
	away.away.Store(true)
	own(t, a, e.claim("A", 1, 0, 1))
	e.blockUntil(1) // the retry waits on the clock
	away.away.Store(false)
	own(t, a, e.claim("A", 2, 0, 1)) // the clock does not move
	if st := startStateOf(t, a); st.State != StateRunning || len(st.Partitions) != 2 || st.Partitions[0].Epoch != 2 {
		t.Fatalf("status %+v, want running both partitions at epoch 2", st)
	}
}
