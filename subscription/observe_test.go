package subscription

import (
	"fmt"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/clock"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/retry"
)

// seen records what an Observer is told.
type seen struct {
	mu       sync.Mutex
	attempts []Attempt
	parks    []string
	resolved []Resolution
	started  []Attempt
}

func (s *seen) Attempted(a Attempt)  { s.mu.Lock(); s.attempts = append(s.attempts, a); s.mu.Unlock() }
func (s *seen) Parked(sub string)    { s.mu.Lock(); s.parks = append(s.parks, sub); s.mu.Unlock() }
func (s *seen) Retried(string, bool) {}
func (s *seen) Started(sub string, known []Attempt) {
	s.mu.Lock()
	s.started = append(s.started, known...)
	s.mu.Unlock()
}
func (s *seen) Resolved(r Resolution) {
	s.mu.Lock()
	s.resolved = append(s.resolved, r)
	s.mu.Unlock()
}

// The Observer is told of each attempt with its outcome and bounded class,
// of the park, and of a job's resume with the time the record was parked.
func TestObserverToldOfAttemptsParkAndResume(t *testing.T) {
	clk := clock.NewFake(t0)
	rec := newRecorder(clk, func(d Delivery, n int) *retry.Failure {
		switch {
		case d.Commit.AggregateID == "bad" && n == 1:
			return &retry.Failure{Classes: []string{"Made-Up-By-The-Guest-42", "Listed"}, Message: "no class declared"}
		case d.Commit.AggregateID == "bad" && n == 2:
			return &retry.Failure{Classes: []string{"Made-Up-By-The-Guest-42"}, Message: "no class declared"}
		case d.Commit.AggregateID == "bad" && n == 3:
			return &retry.Failure{Classes: []string{retry.ClassTrap}, Message: "unreachable"}
		}
		return nil
	})
	s := spec(sub, rec)
	s.HandlerRetry = retry.Settings{MaxAttempts: 3, InitialBackoff: time.Second, MaxBackoff: time.Second,
		Recoverable: []string{"Listed"}}
	s.Parked = retry.ParkedSettings{MaxRetries: retry.NoParkedRetries}
	obs := &seen{}
	e := newEnv(t, Options{Partitions: 1, Concurrency: 1, Observer: obs}, s)
	e.clock = clk
	eng := e.start()
	e.append("Order", "ok")
	e.append("Order", "bad")
	rec.waitHandled(t, "ok", 1)
	for n := 1; n <= 2; n++ {
		checkfor.Eventually(t, func() error {
			if got := len(rec.of("bad")); got != n {
				return fmt.Errorf("%d calls for bad, want %d", got, n)
			}
			return nil
		})
		e.advance()
	}
	e.waitRecord(sub, "Order", "bad", func(*ledger.Record) bool { return true })
	clk.Advance(time.Hour)
	if err := eng.Resume(t.Context(), sub, "Order", "bad", Caller{Actor: "job 7 (ops)", Reason: "fixed"}); err != nil {
		t.Fatal(err)
	}
	rec.waitHandled(t, "bad", 1)
	obs.mu.Lock()
	defer obs.mu.Unlock()
	var got []string
	for _, a := range obs.attempts {
		got = append(got, a.Outcome+"/"+a.Class)
	}
	want := []string{"success/none", "recoverable/Listed", "recoverable/other", "trap/" + retry.ClassTrap, "success/none"}
	if !slices.Equal(got, want) {
		t.Fatalf("attempts %v; want %v", got, want)
	}
	if !slices.Equal(obs.parks, []string{sub}) {
		t.Fatalf("parks %v", obs.parks)
	}
	if len(obs.resolved) != 1 || obs.resolved[0] != (Resolution{Subscription: sub, Action: "resume", By: "job", Parked: time.Hour + 2*time.Second}) {
		t.Fatalf("resolved %+v", obs.resolved)
	}
}

// A long-horizon retry's handler call is told to Attempted, marked
// LongHorizon, with the event's append time (its success has a delivery
// delay); Started names every outcome of both phases at the run's start.
func TestObserverToldOfLongHorizonAttempts(t *testing.T) {
	clk := clock.NewFake(t0)
	var broken atomic.Bool
	broken.Store(true)
	rec := brokenFor(clk, &broken, "p")
	s := brokenSpec(rec)
	obs := &seen{}
	e := newEnv(t, Options{Partitions: 1, Observer: obs}, s)
	e.clock = clk
	e.start()
	e.append("Order", "p")
	e.waitRecord(sub, "Order", "p", func(*ledger.Record) bool { return true })
	e.advance() // the first long-horizon retry: fails
	e.waitRecord(sub, "Order", "p", func(r *ledger.Record) bool { return r.ParkedRetries == 1 })
	broken.Store(false)
	e.advance() // the second: succeeds, and resumes the aggregate
	checkfor.Eventually(t, func() error { return e.recordGone("Order", "p") })
	// The resumed notification says a long-horizon retry resumed it.
	ns := e.notifications()
	if got := notificationTypes(ns); !slices.Equal(got, []string{"parked:p", "resumed:p"}) || ns[1].By != "long-horizon-retry" || ns[1].Actor != actorBerth {
		t.Fatalf("notifications %v, resumed by %q (%q)", got, ns[1].By, ns[1].Actor)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	var long []string
	for _, a := range obs.attempts {
		if a.LongHorizon {
			long = append(long, a.Outcome+"/"+a.Class)
			if a.Appended.IsZero() || a.Ended.Before(a.Appended) {
				t.Errorf("long-horizon attempt %+v: no append time", a)
			}
		}
	}
	if want := []string{"unrecoverable/Bug", "success/none"}; !slices.Equal(long, want) {
		t.Fatalf("long-horizon attempts %v, want %v", long, want)
	}
	phases := map[bool]int{}
	for _, a := range obs.started {
		if a.Subscription != sub {
			t.Errorf("started %+v", a)
		}
		phases[a.LongHorizon]++
	}
	if phases[false] != 9 || phases[true] != 9 {
		t.Fatalf("Started named %d delivery and %d long-horizon label sets, want 9 each: %+v", phases[false], phases[true], obs.started)
	}
}

// The kind of actor a resumed or skipped notification's By names, from
// the actor the engine records.
func TestActorKind(t *testing.T) {
	for actor, want := range map[string]string{
		"alice": "operator", "job 7 (ops)": "job", actorBerth: "long-horizon-retry", actorOutage: "outage",
	} {
		if got := actorKind(actor); got != want {
			t.Errorf("actorKind(%q) = %q, want %q", actor, got, want)
		}
	}
}
