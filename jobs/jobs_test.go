package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/clock"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/jobs"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/subscription"
)

// engine stands in for the subscription engine: a resume or skip takes the
// record out of the real ledger, as the engine does once it is resolved,
// and is remembered. Aggregates in busy fail; those in gone were resolved
// by someone else just before.
type engine struct {
	store ledger.Store
	subs  []string
	mu    sync.Mutex
	calls []string
	busy  map[string]bool
	gone  map[string]bool
	hold  string // an action on this id waits for its context to end, and does nothing
	// block holds an action on an id until the channel closes, whatever its
	// context: an engine slower to stop than the duty's margin.
	block map[string]chan struct{}
	done  []string // the actions that took a record out
}

func (e *engine) Subscriptions() []string { return e.subs }

func (e *engine) act(ctx context.Context, what, sub, typ, id string) error {
	e.mu.Lock()
	e.calls = append(e.calls, what+" "+id)
	busy, gone, hold, block := e.busy[id], e.gone[id], e.hold == id, e.block[id]
	e.mu.Unlock()
	if hold {
		<-ctx.Done()
		return ctx.Err()
	}
	if block != nil {
		<-block
	}
	switch {
	case busy:
		return errors.New("the aggregate is busy")
	case gone:
		return subscription.ErrNotParked
	}
	err := e.store.Update(context.WithoutCancel(ctx), func(tx ledger.Tx) error { return tx.DeleteParked(sub, typ, id) })
	if errors.Is(err, ledger.ErrNotFound) {
		return subscription.ErrNotParked // as the engine answers for a record no longer parked
	}
	if err == nil {
		e.mu.Lock()
		e.done = append(e.done, what+" "+id)
		e.mu.Unlock()
	}
	return err
}

func (e *engine) Resume(ctx context.Context, sub, typ, id string, by subscription.Caller) error {
	return e.act(ctx, "resume", sub, typ, id)
}

func (e *engine) Skip(ctx context.Context, sub, typ, id string, through uint64, by subscription.Caller) error {
	return e.act(ctx, "skip", sub, typ, id)
}

// acted returns the actions that took a record out, in order.
func (e *engine) acted() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.done...)
}

func (e *engine) called() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.calls...)
}

type env struct {
	t     *testing.T
	store ledger.Store
	clock *clock.Fake
	eng   *engine
}

func newEnv(t *testing.T) *env {
	t.Helper()
	store, err := ledger.Open(t.TempDir(), ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close(context.Background()) })
	return &env{t: t, store: store, clock: clock.NewFake(time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)),
		eng: &engine{store: store, subs: []string{"A.h", "B.h"}, busy: map[string]bool{}, gone: map[string]bool{}}}
}

// park puts n records of sub, ids p-00 …, with the error class given.
func (e *env) park(sub string, n int, class string) {
	e.t.Helper()
	err := e.store.Update(context.Background(), func(tx ledger.Tx) error {
		for i := range n {
			r := &ledger.Record{Subscription: sub, AggregateType: "Order", AggregateID: fmt.Sprintf("%s-%02d", sub[:1], i),
				Version: 1, Error: ledger.ErrorInfo{Classes: []string{class}, Message: "refused", Kind: "recoverable"},
				Attempts: 3, State: ledger.StateWaiting, FirstFailure: e.clock.Now(), LastFailure: e.clock.Now()}
			if err := tx.PutParked(r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) open() *jobs.Runner {
	e.t.Helper()
	r, err := jobs.Open(context.Background(), jobs.Options{Ledger: e.store, Engine: e.eng, Clock: e.clock})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { r.Close(context.Background()) })
	return r
}

func (e *env) parked() int {
	n := 0
	e.store.View(context.Background(), func(tx ledger.Tx) error {
		page, _, err := tx.ListParked(ledger.Filter{Limit: 1000})
		n = len(page)
		return err
	})
	return n
}

// waitCalls waits until the fake engine was called n times, and the job's
// goroutine is back on the clock (or finished).
func (e *env) waitCalls(n int) {
	e.t.Helper()
	// Between checks, the wait is for the job's goroutine to block on the
	// clock (up to 50ms), not a sleep.
	checkfor.Nil(e.t, 10*time.Second, 0, func() error {
		got := len(e.eng.called())
		if got >= n {
			return nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		e.clock.BlockUntil(ctx, 1)
		cancel()
		return fmt.Errorf("%d calls, want %d", got, n)
	})
}

// TestJobPacesAndCounts: a job acts on what its filter matches, at most its
// rate on the injected clock, and counts done, failed and gone.
func TestJobPacesAndCounts(t *testing.T) {
	e := newEnv(t)
	e.park("A.h", 6, "ConnectionRefused")
	e.park("B.h", 3, "NullPointer")
	e.eng.busy["A-02"] = true
	e.eng.gone["A-03"] = true
	r := e.open()
	ctx := context.Background()

	n, sample, err := r.DryRun(ctx, jobs.Spec{Action: ledger.JobResume, Filter: ledger.JobFilter{Class: "ConnectionRefused"}, Rate: 2}, 2)
	if err != nil || n != 6 || len(sample) != 2 {
		t.Fatalf("dry run: %d, %d sampled, %v; want 6, 2", n, len(sample), err)
	}
	if len(e.eng.called()) != 0 || e.parked() != 9 {
		t.Fatal("the dry run changed something")
	}
	j, err := r.Create(ctx, jobs.Spec{Action: ledger.JobResume, Filter: ledger.JobFilter{Class: "ConnectionRefused"},
		Actor: "ops", Reason: "outage over", Rate: 2})
	if err != nil || j.Matched != 6 {
		t.Fatalf("create: %+v, %v", j, err)
	}
	// Rate 2/s, burst 1: the first at once, then one every 500ms.
	e.waitCalls(1)
	for want := 2; want <= 6; want++ {
		if err := e.clock.BlockUntil(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if got := len(e.eng.called()); got != want-1 {
			t.Fatalf("before %d×500ms, %d calls", want-1, got)
		}
		e.clock.Advance(500 * time.Millisecond)
		e.waitCalls(want)
	}
	done, err := r.Wait(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if done.State != ledger.JobDone || done.Done != 4 || done.Failed != 1 || done.Gone != 1 || len(done.Failures) != 1 ||
		done.Failures[0].AggregateID != "A-02" || done.Finished.IsZero() {
		t.Fatalf("the finished job: %+v", done)
	}
	if e.parked() != 3+2 { // B's, A-02 (busy) and A-03 (the fake leaves it)
		t.Errorf("%d records parked after the job, want 5", e.parked())
	}
	for _, c := range e.eng.called() {
		if c[len(c)-4:len(c)-3] == "B" {
			t.Errorf("the job acted on %s, which its filter does not match", c)
		}
	}
}

// TestJobGoesOnAfterARestart: a runner closed in the middle of a job (a
// host stopping) leaves it running in the ledger; the next one goes on
// where it was, acting on each record once.
func TestJobGoesOnAfterARestart(t *testing.T) {
	e := newEnv(t)
	e.park("A.h", 10, "ConnectionRefused")
	ctx := context.Background()
	r := e.open()
	j, err := r.Create(ctx, jobs.Spec{Action: ledger.JobSkip, Filter: ledger.JobFilter{Subscriptions: []string{"A.h"}}, Rate: 1})
	if err != nil {
		t.Fatal(err)
	}
	e.waitCalls(1)
	for i := 2; i <= 4; i++ {
		e.clock.Advance(time.Second)
		e.waitCalls(i)
	}
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	r2 := e.open()
	for i := 5; i <= 10; i++ {
		e.clock.Advance(time.Second)
		e.waitCalls(i)
	}
	done, err := r2.Wait(ctx, j.ID)
	if err != nil || done.State != ledger.JobDone || done.Done != 10 {
		t.Fatalf("after the restart: %+v, %v", done, err)
	}
	seen := map[string]bool{}
	for _, c := range e.eng.called() {
		if seen[c] {
			t.Errorf("%s twice", c)
		}
		seen[c] = true
	}
	if e.parked() != 0 {
		t.Errorf("%d left parked", e.parked())
	}
}

// TestCancelStopsAJob: a cancelled job acts on nothing more; cancelling it
// again, or an unknown job, is a clear error.
func TestCancelStopsAJob(t *testing.T) {
	e := newEnv(t)
	e.park("A.h", 5, "X")
	ctx := context.Background()
	r := e.open()
	j, err := r.Create(ctx, jobs.Spec{Action: ledger.JobResume, Rate: 1})
	if err != nil {
		t.Fatal(err)
	}
	e.waitCalls(1)
	got, err := r.Cancel(ctx, j.ID, "ops")
	if err != nil || got.State != ledger.JobCancelled || got.Done != 1 {
		t.Fatalf("cancel: %+v, %v", got, err)
	}
	e.clock.Advance(time.Hour)
	if _, err := r.Wait(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	if n := len(e.eng.called()); n != 1 {
		t.Errorf("%d calls after the cancel, want 1", n)
	}
	if _, err := r.Cancel(ctx, j.ID, "ops"); !errors.Is(err, jobs.ErrFinished) {
		t.Errorf("cancel again: %v, want ErrFinished", err)
	}
	if _, err := r.Cancel(ctx, 99, "ops"); !errors.Is(err, jobs.ErrNotFound) {
		t.Errorf("cancel job 99: %v, want ErrNotFound", err)
	}
	for _, bad := range []jobs.Spec{
		{Action: "replay", Rate: 1},
		{Action: ledger.JobResume, Rate: 0},
		{Action: ledger.JobResume, Rate: 1, Filter: ledger.JobFilter{Subscriptions: []string{"Nope.h"}}},
		{Action: ledger.JobResume, Rate: 1, Filter: ledger.JobFilter{State: "lost"}},
	} {
		if _, err := r.Create(ctx, bad); !errors.Is(err, jobs.ErrInvalid) {
			t.Errorf("create %+v: %v, want ErrInvalid", bad, err)
		}
	}
}

// TestJobStoppedMidActionCountsOnce: a host that stops while an action is in
// flight leaves that record in flight; the job that goes on settles it —
// acted on again since it is still parked — and counts every record once.
func TestJobStoppedMidActionCountsOnce(t *testing.T) {
	e := newEnv(t)
	e.park("A.h", 4, "X")
	e.eng.hold = "A-01"
	ctx := context.Background()
	r := e.open()
	j, err := r.Create(ctx, jobs.Spec{Action: ledger.JobResume, Rate: 1000})
	if err != nil {
		t.Fatal(err)
	}
	e.waitCalls(1)
	e.clock.Advance(time.Second)
	e.waitCalls(2) // A-00 done, A-01 held
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	e.eng.mu.Lock()
	e.eng.hold = ""
	e.eng.mu.Unlock()
	r2 := e.open()
	for i := 3; i <= 5; i++ { // A-01 again, A-02, A-03
		e.waitCalls(i)
		e.clock.Advance(time.Second)
	}
	done, err := r2.Wait(ctx, j.ID)
	if err != nil || done.State != ledger.JobDone || done.Done != 4 || done.Failed != 0 || done.Gone != 0 || done.InFlight != nil {
		t.Fatalf("after going on: %+v, %v; want 4 done, nothing in flight", done, err)
	}
	if e.parked() != 0 {
		t.Errorf("%d left parked", e.parked())
	}
}
