package subscription

import (
	"fmt"
	"slices"
	"sync"
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
}

func (s *seen) Attempted(a Attempt)  { s.mu.Lock(); s.attempts = append(s.attempts, a); s.mu.Unlock() }
func (s *seen) Parked(sub string)    { s.mu.Lock(); s.parks = append(s.parks, sub); s.mu.Unlock() }
func (s *seen) Retried(string, bool) {}
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
		eventuallyNil(t, func() error {
			if got := len(rec.of("bad")); got != n {
				return fmt.Errorf("%d calls for bad, want %d", got, n)
			}
			return nil
		})
		e.advance()
	}
	e.waitRecord(sub, "Order", "bad", func(*ledger.Record) bool { return true })
	clk.Advance(time.Hour)
	if err := eng.Resume(t.Context(), sub, "Order", "bad", "job 7 (ops)", "fixed"); err != nil {
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
