package jobs_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/cluster/clustertest"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/internal/testing/natstest"
	"github.com/berthhq/berth/jobs"
	"github.com/berthhq/berth/ledger"
)

// The jobs of a ledger several hosts share (Options.Shared): runners over
// one real ledger, one of which at a time serves, as the hosts of a cluster
// do with the jobs duty.

// messages is a slog handler that keeps the messages logged.
type messages struct {
	mu  sync.Mutex
	got []string
}

func (m *messages) Enabled(context.Context, slog.Level) bool { return true }
func (m *messages) WithAttrs([]slog.Attr) slog.Handler       { return m }
func (m *messages) WithGroup(string) slog.Handler            { return m }
func (m *messages) Handle(_ context.Context, r slog.Record) error {
	m.mu.Lock()
	m.got = append(m.got, r.Message)
	m.mu.Unlock()
	return nil
}

func (m *messages) count(msg string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, g := range m.got {
		if g == msg {
			n++
		}
	}
	return n
}

// logged says what m has until it has msg exactly once; nil then.
func logged(m *messages, msg string) error {
	if n := m.count(msg); n != 1 {
		m.mu.Lock()
		defer m.mu.Unlock()
		return fmt.Errorf("%q logged %d times; the log: %q", msg, n, m.got)
	}
	return nil
}

// host is one host's runner of a shared ledger, with its own engine.
type host struct {
	r   *jobs.Runner
	eng *engine
	log *messages
}

func (e *env) sharedHost() *host {
	e.t.Helper()
	h := &host{eng: &engine{store: e.store, subs: e.eng.subs, busy: map[string]bool{}, gone: map[string]bool{}}, log: &messages{}}
	r, err := jobs.Open(context.Background(), jobs.Options{Ledger: e.store, Engine: h.eng, Clock: e.clock, Shared: true,
		Logger: slog.New(h.log)})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { r.Close(context.Background()) })
	h.r = r
	return h
}

// serve runs h's Serve, unfenced, until the returned stop, which waits for
// it.
func (h *host) serve() (stop func()) {
	stop, _ = h.serveAs(ledger.DutyFence{})
	return stop
}

// serveAs runs h's Serve under fence until the returned stop, which waits
// for it; returned is closed when Serve returns.
func (h *host) serveAs(fence ledger.DutyFence) (stop func(), returned <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.r.Serve(ctx, fence)
	}()
	return func() { cancel(); <-done }, done
}

// claim claims the jobs duty for host in the ledger at the next epoch, as
// a cluster host does when its term starts.
func (e *env) claim(host string) ledger.DutyFence {
	e.t.Helper()
	f, _, err := ledger.TakeDuty(context.Background(), e.store, "jobs", host)
	if err != nil {
		e.t.Fatal(err)
	}
	return f
}

// drive advances the clock a second at a time until check returns nil; a
// timeout reports check's last error.
func (e *env) drive(check func() error) {
	e.t.Helper()
	checkfor.Nil(e.t, 10*time.Second, time.Millisecond, func() error {
		err := check()
		if err != nil {
			e.clock.Advance(time.Second)
		}
		return err
	})
}

// jobDone says what state job id is in on h until it is done; nil then.
func jobDone(ctx context.Context, h *host, id uint64) error {
	got, err := h.r.Get(ctx, id)
	if err == nil && got.State != ledger.JobDone {
		err = fmt.Errorf("the job %s, %d of %d done", got.State, got.Done, got.Matched)
	}
	return err
}

// atLeast says what got returned until it has at least n records; nil
// then.
func atLeast(what string, got []string, n int) error {
	if len(got) < n {
		return fmt.Errorf("%s %v, want %d", what, got, n)
	}
	return nil
}

// TestSharedJobRunsWhereServed: a job created on a host that does not serve
// is stored, not run there; the serving host finds it at its next look and
// runs it, and the creating host's Wait sees it done.
func TestSharedJobRunsWhereServed(t *testing.T) {
	e := newEnv(t)
	e.park("A.h", 4, "X")
	a, b := e.sharedHost(), e.sharedHost()
	defer b.serve()()
	ctx := context.Background()
	j, err := a.r.Create(ctx, jobs.Spec{Action: ledger.JobResume, Rate: 1000})
	if err != nil {
		t.Fatal(err)
	}
	e.drive(func() error { return jobDone(ctx, a, j.ID) })
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	waited := make(chan *ledger.Job)
	go func() {
		done, _ := a.r.Wait(wctx, j.ID)
		waited <- done
	}()
	if done := <-waited; done == nil || done.State != ledger.JobDone || done.Done != 4 {
		t.Fatalf("Wait on the creating host: %+v", done)
	}
	if n := len(a.eng.called()); n != 0 {
		t.Errorf("the host that does not serve acted %d times", n)
	}
	if n := len(b.eng.called()); n != 4 {
		t.Errorf("the serving host acted %d times, want 4", n)
	}
}

// TestSharedHandover: when the serving host stops serving mid-job (its duty
// moved), its job stops; the next host to serve goes on from the stored
// progress, and every record is acted on once.
func TestSharedHandover(t *testing.T) {
	e := newEnv(t)
	e.park("A.h", 6, "X")
	a, b := e.sharedHost(), e.sharedHost()
	stopA := a.serve()
	ctx := context.Background()
	j, err := a.r.Create(ctx, jobs.Spec{Action: ledger.JobSkip, Rate: 1})
	if err != nil {
		t.Fatal(err)
	}
	e.drive(func() error { return atLeast("a called on", a.eng.called(), 2) })
	stopA()
	acted := len(a.eng.called())
	defer b.serve()()
	e.drive(func() error { return jobDone(ctx, b, j.ID) })
	if n := len(a.eng.called()); n != acted {
		t.Fatalf("a acted %d times after it stopped serving", n-acted)
	}
	seen := map[string]bool{}
	for _, c := range append(a.eng.called(), b.eng.called()...) {
		if seen[c] {
			t.Errorf("%s twice", c)
		}
		seen[c] = true
	}
	if got, _ := b.r.Get(ctx, j.ID); got.Done != 6 || len(seen) != 6 {
		t.Fatalf("after the handover: %+v, %d acted on", got, len(seen))
	}
}

// TestSharedCancelElsewhere: a job cancelled on a host that does not run it
// stops on the host that does, which acts on nothing more and does not
// write its progress over the cancel.
func TestSharedCancelElsewhere(t *testing.T) {
	e := newEnv(t)
	e.park("A.h", 5, "X")
	a, b := e.sharedHost(), e.sharedHost()
	defer b.serve()()
	ctx := context.Background()
	j, err := a.r.Create(ctx, jobs.Spec{Action: ledger.JobResume, Rate: 1})
	if err != nil {
		t.Fatal(err)
	}
	e.drive(func() error { return atLeast("b called on", b.eng.called(), 1) })
	if err := e.clock.BlockUntil(ctx, 1); err != nil { // b's job paces
		t.Fatal(err)
	}
	cancelled, err := a.r.Cancel(ctx, j.ID, "ops")
	if err != nil || cancelled.State != ledger.JobCancelled {
		t.Fatalf("cancel: %+v, %v", cancelled, err)
	}
	acted := len(b.eng.called())
	e.drive(func() error { return logged(b.log, "job stopped: it was cancelled") })
	if n := len(b.eng.called()); n != acted {
		t.Errorf("b acted %d times after the cancel", n-acted)
	}
	if got, _ := a.r.Get(ctx, j.ID); got.State != ledger.JobCancelled || got.Done != cancelled.Done {
		t.Errorf("stored after b stopped: %+v; want it as cancelled: %+v", got, cancelled)
	}
}

// handOverMidJob runs a resume job over 6 records, A-00 to A-05, served by
// a, and has a stuck in an action that does not stop (on A-02) when move
// hands the jobs duty to b. a's action returns once b has acted on A-02
// and A-03, mid-job: unfenced, a would go on over b's progress. It checks
// that a stops, fenced, having acted on nothing more, and that b finishes
// the job with every record acted on once, counted done once.
func (e *env) handOverMidJob(a, b *host, move func()) {
	t := e.t
	t.Helper()
	e.park("A.h", 6, "X")
	release := make(chan struct{})
	a.eng.mu.Lock()
	a.eng.block = map[string]chan struct{}{"A-02": release}
	a.eng.mu.Unlock()
	ctx := context.Background()
	j, err := b.r.Create(ctx, jobs.Spec{Action: ledger.JobResume, Rate: 1})
	if err != nil {
		t.Fatal(err)
	}
	e.drive(func() error {
		if got := a.eng.called(); len(got) != 3 {
			return fmt.Errorf("a called on %v, want it in its action on A-02", got)
		}
		return nil
	})
	move()
	e.drive(func() error { return atLeast("b acted on", b.eng.acted(), 2) })
	close(release)
	checkfor.Nil(t, 10*time.Second, time.Millisecond, func() error {
		return logged(a.log, "job stopped here: the jobs duty moved to another host")
	})
	e.drive(func() error { return jobDone(ctx, b, j.ID) })
	if got := a.eng.called(); len(got) != 3 {
		t.Errorf("a acted on %v; want nothing after A-02", got)
	}
	seen := map[string]bool{}
	for _, c := range append(a.eng.acted(), b.eng.acted()...) {
		if seen[c] {
			t.Errorf("%s twice", c)
		}
		seen[c] = true
	}
	got, _ := b.r.Get(ctx, j.ID)
	if len(seen) != 6 || got.Done != 6 || got.Gone != 0 || got.Failed != 0 || got.InFlight != nil {
		t.Fatalf("after the handover: %+v; %d records acted on", got, len(seen))
	}
	if e.parked() != 0 {
		t.Fatalf("%d records still parked", e.parked())
	}
}

// TestSharedFencedHandover: the jobs duty moves (b claims it in the ledger
// and serves) while its old holder a still serves, in an action that does
// not stop (the timing failed: a clock that jumped, an engine slower than
// the margin). b settles the record a had in flight — still parked, so it
// acts on it — and goes on; a's late action finds the record gone, its
// write of progress is refused (fenced), it acts on nothing more and its
// Serve returns.
func TestSharedFencedHandover(t *testing.T) {
	e := newEnv(t)
	a, b := e.sharedHost(), e.sharedHost()
	stopA, aReturned := a.serveAs(e.claim("a"))
	defer stopA()
	e.handOverMidJob(a, b, func() {
		stopB, _ := b.serveAs(e.claim("b")) // a goes on, unaware
		t.Cleanup(stopB)
	})
	select {
	case <-aReturned:
	case <-time.After(10 * time.Second):
		t.Fatal("a's Serve did not stop once fenced")
	}
}

// TestJobsDutyMovesMidJob: two hosts of a cluster (real leases on an
// in-process NATS server) stand for the jobs duty over one ledger. The
// holder, a, is in its action on a record when its clock stops and it is
// cut off: it goes on believing it holds the duty. b takes the duty over
// once a's lease ran out on the server, claims it at the next epoch, and
// goes on with the job from the record a had in flight; a, refused
// (fenced), acts on nothing more (handOverMidJob).
func TestJobsDutyMovesMidJob(t *testing.T) {
	e := newEnv(t)
	a, b := e.sharedHost(), e.sharedHost()
	srv := natstest.RunServer(t)
	const ttl = 2 * time.Second
	clockA := clustertest.NewClock(t)
	ha := clustertest.Start(t, srv.URL(), "a", e.store, ttl, clockA)
	fa := clustertest.WaitHeld(t, ha.Stand(t, "jobs", a.r.Serve))
	hb := clustertest.Start(t, srv.URL(), "b", e.store, ttl, nil)
	db := hb.Stand(t, "jobs", b.r.Serve)
	e.handOverMidJob(a, b, func() {
		clockA.Stop()
		ha.Cut()
		if fb := clustertest.WaitHeld(t, db); fb.Epoch != fa.Epoch+1 {
			t.Fatalf("b's claim %+v after a's %+v", fb, fa)
		}
	})
}
