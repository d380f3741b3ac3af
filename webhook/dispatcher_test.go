package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestDeliverSigned(t *testing.T) {
	clock := newClock()
	s := openStore(t, t.TempDir())
	signed := newReceiver(t, ok)
	signed.secret, signed.clock = "s3cret", clock.Now
	plain := newReceiver(t, ok)
	d, _ := start(t, s, testOptions(t, clock, signed.hook("ops"), plain.hook("plain")))

	want := note(EventParked, "ShipmentNotifier.onOrderShipped", "o-1")
	notify(t, s, want)
	d.Wake()
	checkfor.Eventually(t, func() error { return errors.Join(signed.countIs(1), plain.countIs(1)) })

	got := signed.requests()[0]
	if got.verr != nil {
		t.Fatalf("signature does not verify: %v", got.verr)
	}
	for k, v := range map[string]string{
		"Content-Type":  "application/json",
		"User-Agent":    "berth-webhooks",
		HeaderEvent:     "parked",
		HeaderDelivery:  "1",
		HeaderTimestamp: strconv.FormatInt(clock.Now().Unix(), 10),
	} {
		if g := got.header.Get(k); g != v {
			t.Errorf("header %s = %q, want %q", k, g, v)
		}
	}
	if !Verify("s3cret", clock.Now().Unix(), got.body, got.header.Get(HeaderSignature)) {
		t.Error("Verify refuses the signature")
	}
	if Verify("other", clock.Now().Unix(), got.body, got.header.Get(HeaderSignature)) {
		t.Error("Verify accepts another secret")
	}
	p := got.payload
	if p.ID != "1" || p.Hook != "ops" || p.Seq != 1 || p.Type != want.Type || p.Subscription != want.Subscription ||
		p.AggregateType != want.AggregateType || p.AggregateID != want.AggregateID || p.Version != want.Version ||
		!p.Time.Equal(want.Time) || p.Error == nil || p.Error.Message != want.Error.Message {
		t.Errorf("payload = %+v, want the notification %+v with id 1 and hook ops", p, want)
	}
	var raw map[string]any
	if err := json.Unmarshal(got.body, &raw); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"id", "hook", "seq", "type", "time", "subscription", "aggregateType", "aggregateId", "version", "error"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("body has no %q: %s", k, got.body)
		}
	}

	unsigned := plain.requests()[0]
	if unsigned.header.Get(HeaderSignature) != "" || unsigned.header.Get(HeaderTimestamp) != "" {
		t.Errorf("a hook without secret signed: %v", unsigned.header)
	}
	if unsigned.payload.Hook != "plain" || unsigned.payload.ID != "1" {
		t.Errorf("plain payload = %+v", unsigned.payload)
	}

	checkfor.Eventually(t, func() error { return outboxEmpty(t, s) })
	if c := durableCursor(t, s, "ops"); c != 1 {
		t.Errorf("durable cursor of ops = %d, want 1", c)
	}
	st := statsOf(d, "ops")
	if st.Delivered != 1 || st.FailedAttempts != 0 || st.Pending != 0 || st.Cursor != 1 || st.LastError != "" {
		t.Errorf("stats = %+v", st)
	}
}

func TestFilters(t *testing.T) {
	clock := newClock()
	s := openStore(t, t.TempDir())
	all, parked, sub1, both := newReceiver(t, ok), newReceiver(t, ok), newReceiver(t, ok), newReceiver(t, ok)
	hParked := parked.hook("parked")
	hParked.Events = []string{EventParked}
	hSub1 := sub1.hook("sub1")
	hSub1.Subscriptions = []string{"S1"}
	hBoth := both.hook("both")
	hBoth.Events, hBoth.Subscriptions = []string{EventResumed, EventSkipped}, []string{"S1"}
	d, _ := start(t, s, testOptions(t, clock, all.hook("all"), hParked, hSub1, hBoth))

	notify(t, s,
		note(EventParked, "S1", "a"),       // 1: all, parked, sub1
		note(EventParked, "S2", "b"),       // 2: all, parked
		note(EventResumed, "S2", "c"),      // 3: all
		note(EventSkipped, "S1", "d"),      // 4: all, sub1, both
		note(EventRetriesSpent, "S1", "e"), // 5: all, sub1
		note(EventRetriesSpent, "S3", "f"), // 6: all
		note(EventResumed, "S1", "g"),      // 7: all, sub1, both
		note(EventParked, "S1.other", "h"), // 8: all, parked
		note(EventSkipped, "S2", "i"),      // 9: all
		note(EventRetriesSpent, "S2", "j"), // 10: all
	)
	d.Wake()
	// Once the outbox is acknowledged every hook has passed every
	// notification, so the counts below are final.
	checkfor.Eventually(t, func() error { return outboxEmpty(t, s) })
	for _, c := range []struct {
		rc   *receiver
		want []string
	}{
		{all, []string{"1", "2", "3", "4", "5", "6", "7", "8", "9", "10"}},
		{parked, []string{"1", "2", "8"}},
		{sub1, []string{"1", "4", "5", "7"}},
		{both, []string{"4", "7"}},
	} {
		if got := c.rc.ids(); !slices.Equal(got, c.want) {
			t.Errorf("%s got %v, want %v", c.rc.requests()[0].payload.Hook, got, c.want)
		}
	}
	for _, st := range d.Stats() {
		if st.Cursor != 10 || st.Pending != 0 || st.FailedAttempts != 0 {
			t.Errorf("stats = %+v", st)
		}
	}
}

func TestWake(t *testing.T) {
	clock := newClock()
	s := openStore(t, t.TempDir())
	rc := newReceiver(t, ok)
	opts := testOptions(t, clock, rc.hook("h"))
	opts.PollInterval = time.Hour
	d, _ := start(t, s, opts)
	notify(t, s, note(EventParked, "S", "1"))
	d.Wake()
	checkfor.Eventually(t, func() error { return cursorAt(t, s, "h", 1) })
	w := workerOf(t, d, "h")
	checkfor.Eventually(t, func() error {
		if n, waiting := w.waitState(); waiting != time.Hour {
			return fmt.Errorf("the hook in wait %d of %v, want it idle for its hour", n, waiting)
		}
		return nil
	})
	idle, _ := w.waitState()

	notify(t, s, note(EventParked, "S", "2"))
	// Still in the same hour's wait: nothing before the poll or a wake.
	if n, waiting := w.waitState(); n != idle || waiting != time.Hour || rc.count() != 1 {
		t.Fatalf("after a notification alone: wait %d (%v), was %d (1h); %d requests, want 1", n, waiting, idle, rc.count())
	}
	d.Wake()
	checkfor.Eventually(t, func() error { return rc.countIs(2) })
}

func TestNoHooksAcknowledgesEverything(t *testing.T) {
	clock := newClock()
	s := openStore(t, t.TempDir())
	notify(t, s, note(EventParked, "S", "1"), note(EventSkipped, "S", "1"))
	d, _ := start(t, s, testOptions(t, clock))
	d.Wake()
	checkfor.Eventually(t, func() error { return outboxEmpty(t, s) })
	if st := d.Stats(); len(st) != 0 {
		t.Errorf("stats = %+v", st)
	}
}

func TestSetHooks(t *testing.T) {
	clock := newClock()
	s := openStore(t, t.TempDir())
	a, good := newReceiver(t, ok), newReceiver(t, ok)
	bad := newReceiver(t, func(received, int) answer { return answer{status: http.StatusInternalServerError} })
	d, _ := start(t, s, testOptions(t, clock, a.hook("a")))
	notify(t, s, note(EventParked, "S", "1"))
	d.Wake()
	checkfor.Eventually(t, func() error { return errors.Join(a.countIs(1), outboxEmpty(t, s)) })

	if err := d.SetHooks([]Hook{a.hook("a"), {Name: "a", URL: good.srv.URL}}); err == nil {
		t.Fatal("a set with a name twice was taken")
	}
	if err := d.SetHooks([]Hook{a.hook("a"), {Name: "x", URL: "ftp://host/"}}); err == nil {
		t.Fatal("a set with a bad URL was taken")
	}

	// Add b, failing.
	if err := d.SetHooks([]Hook{a.hook("a"), bad.hook("b")}); err != nil {
		t.Fatal(err)
	}
	notify(t, s, note(EventParked, "S", "2"))
	d.Wake()
	checkfor.Eventually(t, func() error { return cursorAt(t, s, "a", 2) })
	st := waitFailed(t, d, "b", 1)
	if st.NextAttempt.IsZero() || bad.ids()[0] != "2" {
		t.Fatalf("b: %+v, requests %v", st, bad.ids())
	}

	// Fix b's URL: its delivery is tried again at once, without the clock.
	if err := d.SetHooks([]Hook{a.hook("a"), good.hook("b")}); err != nil {
		t.Fatal(err)
	}
	checkfor.Eventually(t, func() error { return statsHold(d, "b", func(st HookStats) bool { return st.Delivered == 1 }) })
	if st := statsOf(d, "b"); st.Delivered != 1 || st.FailedAttempts != 1 {
		t.Errorf("b stats = %+v", st)
	}

	// Remove a: it is told nothing more, and it is gone from Stats.
	wa := workerOf(t, d, "a")
	if err := d.SetHooks([]Hook{good.hook("b")}); err != nil {
		t.Fatal(err)
	}
	notify(t, s, note(EventSkipped, "S", "3"))
	d.Wake()
	checkfor.Eventually(t, func() error { return good.countIs(2) })
	waitStopped(t, wa) // nothing can be sent to a any more
	if n := a.count(); n != 2 {
		t.Fatalf("a told %d times, want nothing more than 2", n)
	}
	if st := d.Stats(); len(st) != 1 || st[0].Name != "b" {
		t.Errorf("stats = %+v", st)
	}
	if c := durableCursor(t, s, "a"); c != 2 {
		t.Errorf("removed a's cursor = %d, want it kept at 2", c)
	}

	// Narrow b's filter: skipped notifications no longer reach it.
	nb := good.hook("b")
	nb.Events = []string{EventParked}
	if err := d.SetHooks([]Hook{nb}); err != nil {
		t.Fatal(err)
	}
	notify(t, s, note(EventSkipped, "S", "4"), note(EventParked, "S", "5"))
	d.Wake()
	checkfor.Eventually(t, func() error { return good.countIs(3) })
	if got := good.ids(); !slices.Equal(got, []string{"2", "3", "5"}) {
		t.Errorf("b got %v", got)
	}
}

func TestSetHooksConcurrently(t *testing.T) {
	clock := newClock()
	s := openStore(t, t.TempDir())
	a, b := newReceiver(t, ok), newReceiver(t, ok)
	d, _ := start(t, s, testOptions(t, clock, a.hook("a")))
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for i := range 4 {
		wg.Go(func() {
			for j := 0; ; j++ {
				select {
				case <-stop:
					return
				default:
				}
				switch (i + j) % 4 {
				case 0:
					_ = d.SetHooks([]Hook{a.hook("a"), b.hook("b")})
				case 1:
					_ = d.SetHooks([]Hook{a.hook("a")})
				case 2:
					d.Wake()
				case 3:
					_ = d.Stats()
				}
			}
		})
	}
	for i := range 20 {
		notify(t, s, note(EventParked, "S", strconv.Itoa(i)))
	}
	checkfor.Eventually(t, func() error { return statsHold(d, "a", func(st HookStats) bool { return st.Delivered == 20 }) })
	close(stop)
	wg.Wait()
	if got := a.ids(); len(got) != 20 {
		t.Errorf("a got %d deliveries, want 20: %v", len(got), got)
	}
}

func TestRunAndClose(t *testing.T) {
	s := openStore(t, t.TempDir())
	bad := New(s, Options{Hooks: []Hook{{Name: "x"}}})
	if err := bad.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "url") {
		t.Errorf("Run with an invalid hook = %v", err)
	}

	d := New(s, Options{PollInterval: time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- d.Run(ctx) }()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("Run after its context ended = %v", err)
	}
	go func() { errc <- d.Run(context.Background()) }()
	checkfor.Eventually(t, d.runStarted)
	if err := d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Errorf("Run after Close = %v, want nil", err)
	}
	if err := d.Run(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Run on a closed dispatcher = %v", err)
	}
	if err := d.Close(context.Background()); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

func TestStatsWithoutLedger(t *testing.T) {
	s := openStore(t, t.TempDir())
	d := New(s, Options{Hooks: []Hook{{Name: "h", URL: "http://127.0.0.1:1/"}}})
	notify(t, s, note(EventParked, "S", "1"))
	if st := d.Stats(); len(st) != 1 || st[0].Pending != 1 {
		t.Errorf("stats before Run = %+v", st)
	}
	_ = s.Close(context.Background())
	if st := d.Stats(); st[0].Pending != -1 {
		t.Errorf("stats on a closed ledger = %+v, want Pending -1", st)
	}
}

// TestResumedSaysByWhom: a resumed notification's body says which kind of
// actor resumed the aggregate ("by": operator, job, long-horizon-retry,
// outage) beside the actor's own name.
func TestResumedSaysByWhom(t *testing.T) {
	clock := newClock()
	s := openStore(t, t.TempDir())
	r := newReceiver(t, ok)
	d, _ := start(t, s, testOptions(t, clock, r.hook("ops")))
	n := note(EventResumed, "ShipmentNotifier.onOrderShipped", "o-1")
	n.Error, n.Actor, n.By, n.Reason = nil, "berth", "long-horizon-retry", "long-horizon retry succeeded"
	notify(t, s, n)
	d.Wake()
	checkfor.Eventually(t, func() error { return r.countIs(1) })
	var raw map[string]any
	if err := json.Unmarshal(r.requests()[0].body, &raw); err != nil {
		t.Fatal(err)
	}
	if raw["by"] != "long-horizon-retry" || raw["actor"] != "berth" || raw["type"] != "resumed" {
		t.Errorf("body %v", raw)
	}
}
