package subscription

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/retry"
)

// outageScript fails every call while down; afterwards the aggregates in
// buggy fail with a bug of their own and the rest succeed.
func outageScript(down *atomic.Bool, buggy ...string) func(d Delivery, n int) *retry.Failure {
	return func(d Delivery, n int) *retry.Failure {
		if down.Load() {
			return &retry.Failure{Classes: []string{"SQLException"}, Message: "db gone"}
		}
		for _, b := range buggy {
			if d.Commit.AggregateID == b {
				return &retry.Failure{Classes: []string{"NullPointerException"}, Message: "bug"}
			}
		}
		return nil
	}
}

// storedFailures returns the failures the ledger's budget of Order/id
// counts, -1 when it keeps none.
func (e *env) storedFailures(id string) int {
	e.t.Helper()
	var b []byte
	err := e.store.View(context.Background(), func(tx ledger.Tx) error {
		var err error
		b, err = tx.Meta(sub, budgetKey(aggKey{"Order", id}))
		return err
	})
	if err != nil {
		return -1
	}
	var sb storedBudget
	if err := json.Unmarshal(b, &sb); err != nil {
		e.t.Fatal(err)
	}
	return sb.Failures
}

// budgetCounts says how many failures id's stored budget counts until it
// is want; nil then.
func (e *env) budgetCounts(id string, want int) error {
	if n := e.storedFailures(id); n != want {
		return fmt.Errorf("%s's budget counts %d failures, want %d", id, n, want)
	}
	return nil
}

// startOutage appends a, b and c (one partition, one at a time, so in that
// order) with the database down: a and b fail once each, charged as
// ordinary failures, and c's failure reveals the outage. It waits until the
// partition has paused and the ledger's budgets of a and b were refunded.
func startOutage(t *testing.T, maxAttempts int, down *atomic.Bool, buggy ...string) (*env, *recorder) {
	t.Helper()
	rec := newRecorder(nil, outageScript(down, buggy...))
	s := spec(sub, rec)
	s.OverrideRetry = retry.Settings{MaxAttempts: maxAttempts}
	e := newEnv(t, Options{Partitions: 1, Concurrency: 1}, s)
	rec.clock = e.clock
	down.Store(true)
	e.start()
	for _, id := range []string{"a", "b", "c"} {
		e.append("Order", id)
	}
	checkfor.Eventually(t, func() error { return e.stateOf(sub, StateSystemicPaused) })
	for _, id := range []string{"a", "b"} {
		if n := len(rec.of(id)); n != 1 {
			t.Fatalf("%s called %d times before the pause, want 1", id, n)
		}
		checkfor.Eventually(t, func() error { return e.budgetCounts(id, 0) })
	}
	return e, rec
}

// driveUntil advances the clock whenever the engine waits on it for less
// than a minute (a backoff, a probe's wait), until check returns nil. A
// long-horizon retry, minutes after a park, is never reached: check may see
// the park only after its retry has been scheduled. A timeout reports
// check's last error and the clock's next timer.
func (e *env) driveUntil(check func() error) {
	e.t.Helper()
	checkfor.Nil(e.t, 10*time.Second, time.Millisecond, func() error {
		err := check()
		if err == nil {
			return nil
		}
		d, ok := e.clock.NextFire()
		if ok && d < time.Minute {
			e.clock.Advance(d)
		}
		return fmt.Errorf("%w; the clock's next timer: %v (set: %v)", err, d, ok)
	})
}

// parkedAll says which of ids has no record until each has one; nil then.
func (e *env) parkedAll(ids ...string) error {
	for _, id := range ids {
		if e.record(sub, "Order", id) == nil {
			return fmt.Errorf("%s not parked", id)
		}
	}
	return nil
}

// handledTimes says how often each aggregate was handled until it was
// handled as often as want says; nil then.
func (r *recorder) handledTimes(want map[string]int) error {
	for id, n := range want {
		if got := r.handled(id); len(got) != n {
			return fmt.Errorf("%s handled %v, want %d times", id, got, n)
		}
	}
	return nil
}

// The first two aggregates of a partition fail before the third reveals the
// outage: their attempts are refunded when the pause begins, so after the
// outage each still has its whole budget — with a bug of their own, each
// parks only after MaxAttempts further failures.
func TestOutageRefundsTheFailuresThatRevealedIt(t *testing.T) {
	const maxAttempts = 3
	var down atomic.Bool
	e, rec := startOutage(t, maxAttempts, &down, "a", "b")
	down.Store(false) // the database is back; a and b have bugs of their own
	e.driveUntil(func() error { return e.parkedAll("a", "b") })
	rec.waitHandled(t, "c", 1)
	for _, id := range []string{"a", "b"} {
		r := e.record(sub, "Order", id)
		// 1 attempt before the outage (refunded), then the whole budget.
		if r.Attempts != 1+maxAttempts || len(rec.of(id)) != 1+maxAttempts || r.Error.Classes[0] != "NullPointerException" {
			t.Errorf("%s: record %+v after %d calls, want %d attempts", id, r, len(rec.of(id)), 1+maxAttempts)
		}
	}
}

// The refund is in the ledger's budget too: after a crash during the
// outage, the first two aggregates start again with their whole budget.
func TestOutageRefundSurvivesACrash(t *testing.T) {
	const maxAttempts = 3
	var down atomic.Bool
	e, rec := startOutage(t, maxAttempts, &down, "a", "b")
	down.Store(false)
	e.crash()
	e.driveUntil(func() error { return e.parkedAll("a", "b") })
	for _, id := range []string{"a", "b"} {
		r := e.record(sub, "Order", id)
		if r.Attempts != 1+maxAttempts || len(rec.of(id)) != 1+maxAttempts {
			t.Errorf("%s: record %+v after %d calls, want %d attempts", id, r, len(rec.of(id)), 1+maxAttempts)
		}
	}
}

// Only the failures the detector counted are refunded: a failure of a class
// the handler calls recoverable on purpose is the aggregate's, outage or
// not, and keeps its charge.
func TestOutageKeepsChargesItDidNotCount(t *testing.T) {
	var down atomic.Bool
	down.Store(true)
	rec := newRecorder(nil, func(d Delivery, n int) *retry.Failure {
		if d.Commit.AggregateID == "own" {
			return &retry.Failure{Classes: []string{"OwnBug"}, Message: "bug"}
		}
		if down.Load() {
			return &retry.Failure{Classes: []string{"SQLException"}, Message: "db gone"}
		}
		return nil
	})
	s := spec(sub, rec)
	s.OverrideRetry = retry.Settings{MaxAttempts: 3, Recoverable: []string{"OwnBug"}}
	e := newEnv(t, Options{Partitions: 1, Concurrency: 1}, s)
	rec.clock = e.clock
	e.start()
	for _, id := range []string{"own", "a", "b", "c"} {
		e.append("Order", id)
	}
	checkfor.Eventually(t, func() error { return e.stateOf(sub, StateSystemicPaused) })
	checkfor.Eventually(t, func() error { return errors.Join(e.budgetCounts("a", 0), e.budgetCounts("b", 0)) })
	if n := e.storedFailures("own"); n != 1 {
		t.Fatalf("own's budget counts %d failures, want 1", n)
	}
}

// An aggregate whose attempt is in flight when the outage is recognised is
// refunded as soon as that attempt ends, and the attempt itself, failing
// during the pause, is not charged either.
func TestOutageRefundsAnAttemptInFlight(t *testing.T) {
	var down atomic.Bool
	down.Store(true)
	started, release := make(chan struct{}), make(chan struct{})
	rec := newRecorder(nil, func(d Delivery, n int) *retry.Failure {
		if d.Commit.AggregateID == "a" && n == 2 {
			close(started)
			<-release // in flight while b and c fail; closed at the test's end if it fails first
		}
		if down.Load() {
			return &retry.Failure{Classes: []string{"SQLException"}, Message: "db gone"}
		}
		return nil
	})
	s := spec(sub, rec)
	s.OverrideRetry = retry.Settings{MaxAttempts: 2}
	e := newEnv(t, Options{Partitions: 1, Concurrency: 2}, s)
	unblock := unblockAtEnd(t, release)
	rec.clock = e.clock
	e.start()
	e.append("Order", "a")
	checkfor.Eventually(t, func() error { return rec.attempted("a", 1) })
	checkfor.Eventually(t, func() error { return e.budgetCounts("a", 1) })
	e.advance() // a's backoff: its second attempt starts and waits
	// In flight before b and c fail, or the outage would refund a in its backoff.
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("a's second attempt did not start")
	}
	e.append("Order", "b")
	e.append("Order", "c")
	checkfor.Eventually(t, func() error { return e.stateOf(sub, StateSystemicPaused) })
	checkfor.Eventually(t, func() error { return e.budgetCounts("b", 0) })
	if n := e.storedFailures("a"); n != 1 {
		t.Fatalf("a's budget counts %d failures while its attempt is in flight, want 1", n)
	}
	unblock()
	checkfor.Eventually(t, func() error { return e.budgetCounts("a", 0) })
	down.Store(false)
	e.driveUntil(func() error { return rec.handledTimes(map[string]int{"a": 1, "b": 1, "c": 1}) })
	if st := e.status(sub); len(st.Parked) != 0 {
		t.Fatalf("parked %+v", st.Parked)
	}
}

// parkBeforeOutage parks a on a budget of three failures (backoff 200 ms
// then 400 ms) that the detector counted, a alone failing, then fails b and
// c: the third aggregate within the window, c's failure reveals the outage
// a moment after a parked. v2 of a is appended while it is parked, so that
// it is held. After the outage the aggregates in buggy fail with a bug of
// their own (outageScript).
func parkBeforeOutage(t *testing.T, down *atomic.Bool, buggy ...string) (*env, *recorder) {
	t.Helper()
	rec := newRecorder(nil, outageScript(down, buggy...))
	s := spec(sub, rec)
	s.OverrideRetry = retry.Settings{MaxAttempts: 3, InitialBackoff: 200 * time.Millisecond, MaxBackoff: time.Second}
	e := newEnv(t, Options{Partitions: 1, Concurrency: 4}, s)
	rec.clock = e.clock
	down.Store(true)
	e.start()
	e.append("Order", "a")
	checkfor.Eventually(t, func() error { return rec.attempted("a", 1) })
	e.advance() // 200ms
	checkfor.Eventually(t, func() error { return rec.attempted("a", 2) })
	e.advance() // 400ms
	e.waitRecord(sub, "Order", "a", func(r *ledger.Record) bool { return r.State == ledger.StateRetrying })
	e.append("Order", "a")
	e.append("Order", "b")
	checkfor.Eventually(t, func() error { return rec.attempted("b", 1) })
	e.append("Order", "c")
	checkfor.Eventually(t, func() error { return e.stateOf(sub, StateSystemicPaused) })
	return e, rec
}

// An aggregate that parked on a spent budget whose failures the detector
// counted toward the outage it recognised a moment later is treated like
// the other aggregates that revealed it: the host resumes it from the event
// it stopped at, with those attempts refunded (in the ledger's budget too),
// its history and the outbox say so, and once the outage is over its events
// are delivered in order without an operator.
func TestOutageRevertsAParkItsFailuresRevealed(t *testing.T) {
	var down atomic.Bool
	e, rec := parkBeforeOutage(t, &down)
	r := e.waitRecord(sub, "Order", "a", func(r *ledger.Record) bool { return r.State == ledger.StateResuming })
	last := r.History[len(r.History)-1]
	if last.Action != "resumed" || last.Actor != actorOutage || !strings.Contains(last.Reason, "3 attempts refunded") {
		t.Fatalf("a's last history entry %+v, want resumed by %q, 3 attempts refunded", last, actorOutage)
	}
	if n := e.storedFailures("a"); n != 0 {
		t.Fatalf("a's budget in the ledger counts %d failures, want 0", n)
	}
	// The schedule in memory is dropped just after the resume is committed
	// (the ledger's group commit may answer the resume a moment later).
	checkfor.Eventually(t, func() error {
		if at, ok := e.scheduled(sub, "Order", "a"); ok {
			return fmt.Errorf("a's long-horizon retry still scheduled at %v after the host resumed it", at)
		}
		return nil
	})
	ns := e.notifications()
	if got, want := notificationTypes(ns), []string{"parked:a", "resumed:a"}; !slices.Equal(got, want) {
		t.Fatalf("notifications %v, want %v", got, want)
	}
	if ns[1].Actor != actorOutage || ns[1].By != "outage" {
		t.Fatalf("resumed notification by %q (%q), want %q (outage)", ns[1].Actor, ns[1].By, actorOutage)
	}
	down.Store(false)
	e.driveUntil(func() error { return rec.handledTimes(map[string]int{"a": 2, "b": 1, "c": 1}) })
	if got := rec.handled("a"); !slices.Equal(got, []uint64{1, 2}) {
		t.Fatalf("a handled %v, want [1 2]", got)
	}
	// Three failures before the outage, then the success: the attempts go on
	// counting, though the budget was refunded.
	if calls := rec.of("a"); len(calls) != 5 || calls[3].Attempt != 4 || !calls[3].OK {
		t.Fatalf("a's calls %+v, want the fourth (attempt 4) to succeed", calls)
	}
	checkfor.Eventually(t, func() error { return e.recordGone("Order", "a") })
	if st := e.waitIdle(sub); len(st.Parked) != 0 {
		t.Fatalf("parked %+v", st.Parked)
	}
}

// The host's resume and the refunded budget are one transaction: after a
// crash during the outage, the aggregate is replayed from the event it
// stopped at with the refunded budget, so a bug of its own after the outage
// parks it only after a whole budget of further failures.
func TestOutageRevertedParkSurvivesACrash(t *testing.T) {
	var down atomic.Bool
	e, rec := parkBeforeOutage(t, &down, "a")
	e.waitRecord(sub, "Order", "a", func(r *ledger.Record) bool { return r.State == ledger.StateResuming })
	down.Store(false)
	e.crash()
	e.driveUntil(func() error {
		if r := e.record(sub, "Order", "a"); r == nil || r.State == ledger.StateResuming {
			return fmt.Errorf("a not parked again: %+v", r)
		}
		return nil
	})
	r := e.record(sub, "Order", "a")
	if r.Attempts != 6 || len(rec.of("a")) != 6 || r.Version != 1 || r.Error.Classes[0] != "NullPointerException" {
		t.Fatalf("a parked again: %+v after %d calls, want at v1 after 6 attempts: three refunded, three more", r, len(rec.of("a")))
	}
	rec.waitHandled(t, "b", 1)
	rec.waitHandled(t, "c", 1)
}

// A park whose counted failures left the window before the outage was
// recognised did not reveal it: it stays parked, while the parks the outage's
// window counted are resumed by the host.
func TestOutageLeavesAnOlderParkParked(t *testing.T) {
	var down atomic.Bool
	down.Store(true)
	rec := newRecorder(nil, outageScript(&down))
	s := spec(sub, rec)
	s.OverrideRetry = retry.Settings{MaxAttempts: 1}
	// No long-horizon retry, so that driving the clock resumes nothing.
	s.Parked = retry.ParkedSettings{MaxRetries: retry.NoParkedRetries}
	e := newEnv(t, Options{Partitions: 1, Concurrency: 4, Systemic: retry.SystemicWindow{Aggregates: 3, Window: 10 * time.Second}}, s)
	rec.clock = e.clock
	e.start()
	waiting := func(r *ledger.Record) bool { return r.State == ledger.StateWaiting }
	e.append("Order", "a")
	e.waitRecord(sub, "Order", "a", waiting)
	e.clock.Advance(10 * time.Second) // a's failure leaves the window
	for _, id := range []string{"b", "c"} {
		e.append("Order", id)
		e.waitRecord(sub, "Order", id, waiting)
	}
	e.append("Order", "d") // the third aggregate failing within the window
	resuming := func(r *ledger.Record) bool { return r.State == ledger.StateResuming }
	// The host resumes the parks in the order they were made, so a was
	// passed over by the time c is resuming.
	e.waitRecord(sub, "Order", "b", resuming)
	e.waitRecord(sub, "Order", "c", resuming)
	if r := e.record(sub, "Order", "a"); r == nil || r.State != ledger.StateWaiting {
		t.Fatalf("a's record %+v, want it still parked", r)
	}
	down.Store(false)
	e.driveUntil(func() error { return rec.handledTimes(map[string]int{"b": 1, "c": 1, "d": 1}) })
	checkfor.Eventually(t, func() error { return e.recordGone("Order", "b", "c") })
	if r := e.record(sub, "Order", "a"); r == nil || r.State != ledger.StateWaiting || len(rec.of("a")) != 1 {
		t.Fatalf("a's record %+v after %d calls, want it parked, untouched", r, len(rec.of("a")))
	}
	want := []string{"parked:a", "parked:b", "parked:c", "resumed:b", "resumed:c"}
	if got := notificationTypes(e.notifications()); !slices.Equal(got, want) {
		t.Fatalf("notifications %v, want %v", got, want)
	}
}

// attempted says how many calls r had for agg until it had n; nil then.
func (r *recorder) attempted(agg string, n int) error {
	if got := r.of(agg); len(got) != n {
		return fmt.Errorf("%d calls for %s, want %d: %+v", len(got), agg, n, got)
	}
	return nil
}

// TestAttemptCountsOutageProbes pins what ABI.md says `attempt` counts
// during an outage: each probe of the paused partition is a call of the
// probed event and adds one to its attempt, past the retry budget (the
// budget is not spent by them: the event still has it after the outage),
// and the call that succeeds once the outage is over goes on counting.
func TestAttemptCountsOutageProbes(t *testing.T) {
	const maxAttempts = 3
	var down atomic.Bool
	e, rec := startOutage(t, maxAttempts, &down)
	probed := func() (string, []int) {
		for _, id := range []string{"a", "b", "c"} {
			var n []int
			for _, c := range rec.of(id) {
				n = append(n, c.Attempt)
			}
			if len(n) > maxAttempts+2 {
				return id, n
			}
		}
		return "", nil
	}
	e.driveUntil(func() error {
		if id, _ := probed(); id == "" {
			return errors.New("no aggregate probed past its budget yet")
		}
		return nil
	})
	down.Store(false)
	e.driveUntil(func() error { return rec.handledTimes(map[string]int{"a": 1, "b": 1, "c": 1}) })
	id, attempts := probed()
	for i, a := range attempts {
		if a != i+1 {
			t.Fatalf("%s called with attempts %v, want 1, 2, 3, … (probes counted)", id, attempts)
		}
	}
	if calls := rec.of(id); !calls[len(calls)-1].OK {
		t.Fatalf("%s: its last call %+v did not succeed", id, calls[len(calls)-1])
	}
	t.Logf("%s: attempts %v (max-attempts %d)", id, attempts, maxAttempts)
}
