package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/clock"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/ledger"
)

// newClock returns the injected Options.Clock: it moves only when told.
func newClock() *clock.Fake { return clock.NewFake(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)) }

// received is one request a receiver got.
type received struct {
	header  http.Header
	body    []byte
	payload Payload
	verr    error // VerifyRequest's answer when the receiver has a secret
}

// answer is what a receiver answers: a status and optional headers.
type answer struct {
	status int
	header map[string]string
}

// receiver is a real HTTP endpoint recording every request.
type receiver struct {
	t      *testing.T
	srv    *httptest.Server
	secret string
	clock  func() time.Time

	mu      sync.Mutex
	reqs    []received
	respond func(r received, nth int) answer // nth counts requests from 1
}

func newReceiver(t *testing.T, respond func(r received, nth int) answer) *receiver {
	t.Helper()
	rc := &receiver{t: t, respond: respond}
	rc.srv = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.srv.Close)
	return rc
}

func ok(received, int) answer { return answer{status: http.StatusOK} }

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	var got received
	got.header = r.Header.Clone()
	if rc.secret != "" {
		got.body, got.verr = VerifyRequest(r, rc.secret, rc.clock(), 0)
	}
	if got.body == nil {
		got.body, _ = io.ReadAll(r.Body)
	}
	if err := json.Unmarshal(got.body, &got.payload); err != nil {
		rc.t.Errorf("receiver: body is not a payload: %v: %s", err, got.body)
	}
	rc.mu.Lock()
	rc.reqs = append(rc.reqs, got)
	nth, respond := len(rc.reqs), rc.respond
	rc.mu.Unlock()
	a := answer{status: http.StatusOK}
	if respond != nil {
		a = respond(got, nth)
	}
	for k, v := range a.header {
		w.Header().Set(k, v)
	}
	w.WriteHeader(a.status)
}

func (rc *receiver) requests() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.reqs...)
}

func (rc *receiver) count() int { return len(rc.requests()) }

// countIs says how many requests rc has had until it has had want; nil
// then.
func (rc *receiver) countIs(want int) error {
	if ids := rc.ids(); len(ids) != want {
		return fmt.Errorf("%d requests with ids %v, want %d", len(ids), ids, want)
	}
	return nil
}

// ids returns the delivery ids of the requests in order.
func (rc *receiver) ids() []string {
	var out []string
	for _, r := range rc.requests() {
		out = append(out, r.payload.ID)
	}
	return out
}

func (rc *receiver) hook(name string) Hook {
	return Hook{Name: name, URL: rc.srv.URL + "/hook", Secret: rc.secret}
}

// openStore opens a real Badger ledger in dir, closed at the end of the test.
func openStore(t *testing.T, dir string) *ledger.Badger {
	t.Helper()
	s, err := ledger.Open(dir, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

func notify(t *testing.T, s ledger.Store, ns ...ledger.Notification) {
	t.Helper()
	err := s.Update(context.Background(), func(tx ledger.Tx) error {
		for _, n := range ns {
			if err := tx.Notify(n); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func note(typ, sub, id string) ledger.Notification {
	return ledger.Notification{
		Type: typ, Subscription: sub, AggregateType: "order", AggregateID: id, Version: 3,
		Time:  time.Date(2030, 1, 2, 3, 0, 0, 0, time.UTC),
		Error: &ledger.ErrorInfo{Message: "buyer unknown", Kind: "unrecoverable", Classes: []string{"UnknownBuyer"}},
	}
}

func queued(t *testing.T, s ledger.Store) []ledger.Notification {
	t.Helper()
	var ns []ledger.Notification
	err := s.View(context.Background(), func(tx ledger.Tx) (err error) {
		ns, err = tx.Notifications(0, 1000)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

func durableCursor(t *testing.T, s ledger.Store, name string) uint64 {
	t.Helper()
	var c uint64
	err := s.View(context.Background(), func(tx ledger.Tx) (err error) {
		c, err = readCursor(tx, name)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// testOptions are fast options on clock: polling every 2ms of real time.
func testOptions(t *testing.T, clk *clock.Fake, hooks ...Hook) Options {
	return Options{
		Hooks:        hooks,
		Clock:        clk,
		PollInterval: 2 * time.Millisecond,
		Logger:       slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
}

// start runs a dispatcher; the returned stop (also run at cleanup) closes
// it and checks what Run returned.
func start(t *testing.T, s ledger.Store, opts Options) (*Dispatcher, func()) {
	t.Helper()
	d := New(s, opts)
	errc := make(chan error, 1)
	go func() { errc <- d.Run(context.Background()) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := d.Close(ctx); err != nil {
				t.Errorf("Close: %v", err)
			}
			if err := <-errc; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return d, stop
}

// outboxEmpty says what the outbox holds until it is empty; nil then.
func outboxEmpty(t *testing.T, s ledger.Store) error {
	if ns := queued(t, s); len(ns) != 0 {
		return fmt.Errorf("%d notifications still in the outbox, the first %+v", len(ns), ns[0])
	}
	return nil
}

// cursorAt says where the named hook's durable cursor is until it is
// want; nil then.
func cursorAt(t *testing.T, s ledger.Store, name string, want uint64) error {
	if c := durableCursor(t, s, name); c != want {
		return fmt.Errorf("%s's durable cursor %d, want %d", name, c, want)
	}
	return nil
}

// statsHold says what the named hook's stats are until ok holds of them;
// nil then.
func statsHold(d *Dispatcher, name string, ok func(HookStats) bool) error {
	if s := statsOf(d, name); !ok(s) {
		return fmt.Errorf("%s's stats %+v", name, s)
	}
	return nil
}

// workerOf returns the worker of the named hook.
func workerOf(t *testing.T, d *Dispatcher, name string) *worker {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	w := d.workers[name]
	if w == nil {
		t.Fatalf("no hook %q", name)
	}
	return w
}

// waitState returns how many waits the worker began and the length of the
// one it is in (0 while it works).
func (w *worker) waitState() (uint64, time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.waits, w.waiting
}

// settles waits until the named hook's worker has begun to wait twice
// since the call, then checks that cond holds. The second wait follows a
// whole step that began after the call: the worker has looked at the outbox
// and at the clock as they are now and found nothing to do. An attempt it
// made instead would have been answered (and counted by the receiver)
// before that wait began.
func settles(t *testing.T, d *Dispatcher, name, what string, cond func() bool) {
	t.Helper()
	w := workerOf(t, d, name)
	from, _ := w.waitState()
	checkfor.Eventually(t, func() error {
		if n, d := w.waitState(); n < from+2 {
			return fmt.Errorf("%s began %d waits since the call (in one of %v), want 2", name, n-from, d)
		}
		return nil
	})
	if !cond() {
		t.Fatalf("not true once %s had looked: %s", name, what)
	}
}

// waitStopped waits until w's goroutine has ended.
func waitStopped(t *testing.T, w *worker) {
	t.Helper()
	w.mu.Lock()
	done := w.done
	w.mu.Unlock()
	if done == nil {
		t.Fatalf("hook %q never ran", w.name)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("hook %q did not stop", w.name)
	}
}

// runStarted says, until Run is running, that it is not; nil then. There
// is nothing more to say: Run sets one flag as it starts.
func (d *Dispatcher) runStarted() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.running {
		return errors.New("the dispatcher's Run not running yet")
	}
	return nil
}

func statsOf(d *Dispatcher, name string) HookStats {
	for _, s := range d.Stats() {
		if s.Name == name {
			return s
		}
	}
	return HookStats{Name: "missing " + name}
}
