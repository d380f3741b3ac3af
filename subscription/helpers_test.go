package subscription

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/internal/clock"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/retry"
)

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// env is a test's stores (real Badger in a temp dir), fake clock and engine.
type env struct {
	t   *testing.T
	dir string
	log *eventlog.Badger
	// events, when set, is the log engines are opened on instead of log (a
	// log on NATS, or one that fails on purpose); appends still go to log
	// unless the test makes its own.
	events eventlog.Log
	store  *ledger.Badger
	clock  *clock.Fake
	opts   Options
	specs  []Spec
	eng    *Engine
}

func newEnv(t *testing.T, opts Options, specs ...Spec) *env {
	t.Helper()
	e := &env{t: t, dir: t.TempDir(), clock: clock.NewFake(t0), opts: opts, specs: specs}
	e.openStores()
	t.Cleanup(func() {
		if e.eng != nil {
			closeWithin(t, e.eng)
		}
		e.closeStores()
	})
	return e
}

// closeWithin closes eng, failing the test rather than hanging it when
// Close does not return within a minute (a handler that ignores its
// cancelled context holds it); the stores are then left open.
func closeWithin(t *testing.T, eng *Engine) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		eng.Close(context.Background())
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Errorf("engine Close did not return within a minute: an attempt never ended")
	}
}

// recv waits for a value on ch, failing the test after 10 s.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("waited 10s for %s", what)
		panic("unreachable")
	}
}

// block waits, inside a handler, until ch is closed or the attempt is
// cancelled (the engine closing after a test failed), so that no test
// leaves a handler blocked that Close would wait for; false when
// cancelled.
func block(ctx context.Context, ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		return false
	}
}

// unblockAtEnd returns a func that closes ch once, for a test to let
// handlers blocked on ch go on; the test's cleanup calls it too, before the
// engine closes (call it after newEnv), so that a test failing before it
// does not leave a handler blocked that Close would wait for.
func unblockAtEnd(t *testing.T, ch chan struct{}) func() {
	var once sync.Once
	open := func() { once.Do(func() { close(ch) }) }
	t.Cleanup(open)
	return open
}

// eventLog is the log engines of the test are opened on.
func (e *env) eventLog() eventlog.Log {
	if e.events != nil {
		return e.events
	}
	return e.log
}

func (e *env) openStores() {
	e.t.Helper()
	var err error
	if e.log, err = eventlog.Open(e.dir+"/log", eventlog.Options{}); err != nil {
		e.t.Fatal(err)
	}
	if e.store, err = ledger.Open(e.dir+"/ledger", ledger.Options{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) closeStores() {
	if e.log != nil {
		e.log.Close(context.Background())
		e.log = nil
	}
	if e.store != nil {
		e.store.Close(context.Background())
		e.store = nil
	}
}

// start opens and starts an engine over the stores.
func (e *env) start() *Engine {
	e.t.Helper()
	opts := e.opts
	opts.Clock = e.clock
	if opts.Jitter == nil {
		opts.Jitter = func() float64 { return 0.5 }
	}
	eng, err := Open(e.eventLog(), e.store, opts, e.specs...)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := eng.Start(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	e.eng = eng
	e.awaitHeld()
	return eng
}

// awaitHeld waits until every subscription's run holds its parked
// aggregates (holdparked.go), so a test that goes on to move the clock
// finds their retries scheduled.
func (e *env) awaitHeld() {
	e.t.Helper()
	checkfor.Eventually(e.t, func() error {
		for _, name := range e.eng.Subscriptions() {
			s, _ := e.eng.sub(name)
			s.life.RLock()
			r := s.run
			s.life.RUnlock()
			if r != nil && !r.holdingDone() {
				return fmt.Errorf("%s still holding its parked aggregates", name)
			}
		}
		return nil
	})
}

// restart closes the engine and the stores, reopens them and starts again.
func (e *env) restart() *Engine {
	e.t.Helper()
	if err := e.eng.Close(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	e.eng = nil
	e.closeStores()
	e.openStores()
	return e.start()
}

// crash stops the engine without writing its checkpoint, then reopens.
func (e *env) crash() *Engine {
	e.t.Helper()
	e.eng.abandon()
	e.eng = nil
	e.closeStores()
	e.openStores()
	return e.start()
}

func (e *env) append(typ, id string, types ...string) eventlog.Commit {
	e.t.Helper()
	if len(types) == 0 {
		types = []string{"OrderShipped"}
	}
	var evs []eventlog.Event
	for _, ty := range types {
		evs = append(evs, eventlog.Event{Type: ty, Payload: []byte(`{}`)})
	}
	c, err := e.log.Append(context.Background(), eventlog.AppendRequest{
		AggregateType: typ, AggregateID: id, ExpectedVersion: eventlog.AnyVersion, Events: evs, Time: t0,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// advance waits until the engine waits on the clock and moves the clock to
// the earliest timer, returning how far it moved.
func (e *env) advance() time.Duration {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.clock.BlockUntil(ctx, 1); err != nil {
		e.t.Fatalf("engine never waited on the clock: %v", err)
	}
	d, _ := e.clock.NextFire()
	e.clock.Advance(d)
	return d
}

// blockUntil waits until n timers are pending.
func (e *env) blockUntil(n int) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.clock.BlockUntil(ctx, n); err != nil {
		e.t.Fatalf("waiting for %d timers (have %d): %v", n, e.clock.Waiters(), err)
	}
}

// scheduled returns when the engine's scheduler will retry a parked
// aggregate, ok false when it will not.
func (e *env) scheduled(sub, typ, id string) (at time.Time, ok bool) {
	s := e.eng.sched
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok = s.due[schedKey{sub, aggKey{typ, id}}]
	return at, ok
}

// waitGateHeld waits until the subscription's reader is held at its
// closed gate: paused, it has stopped where it would read the next commit,
// and reads nothing until unpaused.
func (e *env) waitGateHeld(name string) {
	e.t.Helper()
	s, err := e.eng.sub(name)
	if err != nil {
		e.t.Fatal(err)
	}
	checkfor.Eventually(e.t, func() error {
		s.gate.mu.Lock()
		defer s.gate.mu.Unlock()
		if s.gate.blocked == 0 {
			return fmt.Errorf("%s's reader not held by the pause: none blocked at its gate", name)
		}
		return nil
	})
}

// waitIdle waits until the subscription has done all it can with the log as
// it is: its checkpoint is past the head, and no partition has an aggregate
// running or waiting for a slot. Nothing more is delivered until something
// changes (an append, an operator, the clock).
func (e *env) waitIdle(name string) Status {
	e.t.Helper()
	return e.waitIdleOf(e.eng, name)
}

// waitIdleOf is waitIdle on eng, one of several hosts' engines.
func (e *env) waitIdleOf(eng *Engine, name string) Status {
	e.t.Helper()
	var st Status
	checkfor.Eventually(e.t, func() error {
		var err error
		if st, err = eng.Status(context.Background(), name); err != nil {
			e.t.Fatal(err)
		}
		if st.Lag != 0 {
			return fmt.Errorf("%s %d events behind, checkpoint %d, head %d", name, st.Lag, st.Checkpoint, st.Head)
		}
		for _, p := range st.Partitions {
			if p.Active != 0 || p.Waiting != 0 {
				return fmt.Errorf("%s partition %d: %d aggregates running, %d waiting", name, p.Index, p.Active, p.Waiting)
			}
		}
		return nil
	})
	return st
}

func (e *env) status(name string) Status {
	e.t.Helper()
	st, err := e.eng.Status(context.Background(), name)
	if err != nil {
		e.t.Fatal(err)
	}
	return st
}

func (e *env) record(sub, typ, id string) *ledger.Record {
	e.t.Helper()
	var rec *ledger.Record
	err := e.store.View(context.Background(), func(tx ledger.Tx) error {
		var err error
		rec, err = tx.Parked(sub, typ, id)
		return err
	})
	if err != nil {
		return nil
	}
	return rec
}

func (e *env) waitRecord(sub, typ, id string, ok func(*ledger.Record) bool) *ledger.Record {
	e.t.Helper()
	var rec *ledger.Record
	checkfor.Eventually(e.t, func() error {
		if rec = e.record(sub, typ, id); rec == nil || !ok(rec) {
			return fmt.Errorf("record %s/%s: %+v", typ, id, rec)
		}
		return nil
	})
	return rec
}

// notifications returns the queued notifications about aggregates; those
// of partitions and of operators' changes to subscriptions (notes.go)
// allNotifications returns too.
func (e *env) notifications() []ledger.Notification {
	e.t.Helper()
	var out []ledger.Notification
	for _, n := range e.allNotifications() {
		if n.AggregateType != "" {
			out = append(out, n)
		}
	}
	return out
}

func (e *env) allNotifications() []ledger.Notification {
	e.t.Helper()
	var ns []ledger.Notification
	if err := e.store.View(context.Background(), func(tx ledger.Tx) error {
		var err error
		ns, err = tx.Notifications(0, 1000)
		return err
	}); err != nil {
		e.t.Fatal(err)
	}
	return ns
}

func notificationTypes(ns []ledger.Notification) []string {
	var out []string
	for _, n := range ns {
		out = append(out, n.Type+":"+n.AggregateID)
	}
	return out
}

// snapshot is everything the ledger holds for a subscription, to check that
// a failed operation changed nothing.
func (e *env) snapshot(sub string) string {
	e.t.Helper()
	out := map[string]any{}
	if err := e.store.View(context.Background(), func(tx ledger.Tx) error {
		recs, _, err := tx.ListParked(ledger.Filter{Subscription: sub, Limit: 1000})
		if err != nil {
			return err
		}
		out["records"] = recs
		ns, err := tx.Notifications(0, 1000)
		if err != nil {
			return err
		}
		out["notifications"] = ns
		cp, ok, err := tx.Checkpoint(sub)
		out["checkpoint"] = []any{cp, ok}
		return err
	}); err != nil {
		e.t.Fatal(err)
	}
	b, _ := json.Marshal(out)
	return string(b)
}

// recordGone says which of ids of type typ still has a record; nil once
// none has.
func (e *env) recordGone(typ string, ids ...string) error {
	for _, id := range ids {
		if r := e.record(sub, typ, id); r != nil {
			return fmt.Errorf("the record of %s/%s still there: %+v", typ, id, r)
		}
	}
	return nil
}

// callsMade says how many calls an invoker had until it had want; nil
// then.
func callsMade(got, want int32) error {
	if got != want {
		return fmt.Errorf("%d calls, want %d", got, want)
	}
	return nil
}

// checkpointAt says where sub's checkpoint is until it is want; nil then.
func (e *env) checkpointAt(sub string, want uint64) error {
	if st := e.status(sub); st.Checkpoint != want {
		return fmt.Errorf("%s's checkpoint %d, want %d (head %d)", sub, st.Checkpoint, want, st.Head)
	}
	return nil
}

// stateOf says what state partition 0 of sub is in until it is want; nil
// then.
func (e *env) stateOf(sub, want string) error {
	if p := e.status(sub).Partitions[0]; p.State != want {
		return fmt.Errorf("%s partition 0 %s, want %s", sub, p.State, want)
	}
	return nil
}

// call is one invocation seen by a recorder.
type call struct {
	Agg     string
	Version uint64
	Index   int
	Attempt int
	Key     string
	At      time.Time
	OK      bool
}

// recorder is a native Go handler that records its calls and fails as its
// script says.
type recorder struct {
	mu     sync.Mutex
	clock  clock.Clock
	calls  []call
	script func(d Delivery, n int) *retry.Failure // n: calls so far for this aggregate, from 1
	per    map[string]int
}

func newRecorder(clock clock.Clock, script func(d Delivery, n int) *retry.Failure) *recorder {
	return &recorder{clock: clock, script: script, per: map[string]int{}}
}

func (r *recorder) Invoke(ctx context.Context, d Delivery) *retry.Failure {
	r.mu.Lock()
	agg := d.Commit.AggregateID
	r.per[agg]++
	n := r.per[agg]
	r.mu.Unlock()
	var f *retry.Failure
	if r.script != nil {
		f = r.script(d, n)
	}
	r.mu.Lock()
	r.calls = append(r.calls, call{Agg: agg, Version: d.Commit.Version, Index: d.Index, Attempt: d.Attempt,
		Key: d.InvocationKey, At: r.clock.Now(), OK: f == nil})
	r.mu.Unlock()
	return f
}

func (r *recorder) all() []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

func (r *recorder) of(agg string) []call {
	var out []call
	for _, c := range r.all() {
		if c.Agg == agg {
			out = append(out, c)
		}
	}
	return out
}

// handled returns the versions of agg handled successfully, in order.
func (r *recorder) handled(agg string) []uint64 {
	var out []uint64
	for _, c := range r.of(agg) {
		if c.OK {
			out = append(out, c.Version)
		}
	}
	return out
}

func (r *recorder) waitHandled(t *testing.T, agg string, n int) {
	t.Helper()
	checkfor.Eventually(t, func() error {
		if got := r.handled(agg); len(got) < n {
			return fmt.Errorf("%s handled %v, want %d events", agg, got, n)
		}
		return nil
	})
}

func seq(from, to uint64) []uint64 {
	var out []uint64
	for v := from; v <= to; v++ {
		out = append(out, v)
	}
	return out
}

func spec(name string, inv Invoker) Spec {
	return Spec{Name: name, Processor: "ShipmentNotifier", Handler: "onOrderShipped", Start: StartBeginning, Invoker: inv}
}

const sub = "ShipmentNotifier.onOrderShipped"
