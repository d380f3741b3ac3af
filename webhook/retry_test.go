package webhook

import (
	"context"
	"errors"
	"fmt"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/syncbuf"
	"github.com/berthhq/berth/ledger"
)

// waitFailed waits until the hook's in-flight delivery has n failed attempts
// and returns its stats.
func waitFailed(t *testing.T, d *Dispatcher, name string, n int) HookStats {
	t.Helper()
	var st HookStats
	checkfor.Eventually(t, func() error {
		st = statsOf(d, name)
		if st.Attempts != n {
			return fmt.Errorf("%s's stats %+v, want it failing %d times", name, st, n)
		}
		return nil
	})
	return st
}

func TestRetryWithBackoff(t *testing.T) {
	clock := newClock()
	s := openStore(t, t.TempDir())
	flaky := newReceiver(t, func(_ received, nth int) answer {
		if nth <= 4 {
			return answer{status: http.StatusInternalServerError}
		}
		return answer{status: http.StatusNoContent}
	})
	opts := testOptions(t, clock, flaky.hook("flaky"))
	opts.MaxBackoff = 4 * time.Second
	d, _ := start(t, s, opts)
	notify(t, s, note(EventParked, "S", "o-1"))
	d.Wake()

	t0 := clock.Now()
	st := waitFailed(t, d, "flaky", 1)
	if want := t0.Add(time.Second); !st.NextAttempt.Equal(want) {
		t.Fatalf("next attempt %v, want %v", st.NextAttempt, want)
	}
	if !strings.Contains(st.LastError, "500") || st.FailedAttempts != 1 || st.Pending != 1 {
		t.Errorf("stats = %+v", st)
	}
	settles(t, d, "flaky", "no retry before the backoff", func() bool { return flaky.count() == 1 })
	clock.Advance(999 * time.Millisecond)
	settles(t, d, "flaky", "no retry 1ms before the backoff", func() bool { return flaky.count() == 1 })

	// Backoff 1s, 2s, 4s, then capped at 4s.
	for i, wait := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		if i == 0 {
			clock.Advance(time.Millisecond)
		} else {
			clock.Advance(wait)
		}
		st := waitFailed(t, d, "flaky", i+2)
		next := []time.Duration{2 * time.Second, 4 * time.Second, 4 * time.Second}[i]
		if want := clock.Now().Add(next); !st.NextAttempt.Equal(want) {
			t.Fatalf("after attempt %d: next attempt %v, want %v", i+2, st.NextAttempt, want)
		}
	}
	clock.Advance(3 * time.Second)
	settles(t, d, "flaky", "no retry before the capped backoff", func() bool { return flaky.count() == 4 })
	clock.Advance(time.Second)
	checkfor.Eventually(t, func() error { return statsHold(d, "flaky", func(st HookStats) bool { return st.Delivered == 1 }) })

	if got := flaky.ids(); !slices.Equal(got, []string{"1", "1", "1", "1", "1"}) {
		t.Errorf("attempts carried ids %v, want the same id each time", got)
	}
	st = statsOf(d, "flaky")
	if st.FailedAttempts != 4 || st.Dropped != 0 || st.Attempts != 0 || !st.NextAttempt.IsZero() || st.LastError != "" {
		t.Errorf("stats = %+v", st)
	}
	checkfor.Eventually(t, func() error { return outboxEmpty(t, s) })
}

func TestDownHookDoesNotBlockOthers(t *testing.T) {
	clock := newClock()
	s := openStore(t, t.TempDir())
	release := make(chan struct{})
	hang := newReceiver(t, func(received, int) answer {
		<-release
		return answer{status: http.StatusOK}
	})
	t.Cleanup(func() { close(release) }) // runs before hang's server closes
	failing := newReceiver(t, func(received, int) answer { return answer{status: http.StatusBadGateway} })
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close() // connection refused
	healthy := newReceiver(t, ok)
	d, _ := start(t, s, testOptions(t, clock,
		hang.hook("hang"), failing.hook("failing"), Hook{Name: "gone", URL: gone.URL}, healthy.hook("healthy")))

	notify(t, s, note(EventParked, "S", "a"))
	notify(t, s, note(EventParked, "S", "b"))
	notify(t, s, note(EventSkipped, "S", "c"))
	d.Wake()
	checkfor.Eventually(t, func() error { return statsHold(d, "healthy", func(st HookStats) bool { return st.Cursor == 3 }) })
	if got := healthy.ids(); !slices.Equal(got, []string{"1", "2", "3"}) {
		t.Errorf("healthy got %v", got)
	}
	checkfor.Eventually(t, func() error {
		return errors.Join(hang.countIs(1),
			statsHold(d, "failing", func(st HookStats) bool { return st.Attempts == 1 }),
			statsHold(d, "gone", func(st HookStats) bool { return st.Attempts == 1 }))
	})
	if e := statsOf(d, "gone").LastError; !strings.Contains(e, "POST") || strings.Contains(e, gone.URL) {
		t.Errorf("gone's error %q should name the POST and not the URL", e)
	}

	// Writers are not held up: the ledger takes more notifications at once.
	begin := time.Now()
	for range 20 {
		notify(t, s, note(EventParked, "S", "more"))
	}
	if took := time.Since(begin); took > 2*time.Second {
		t.Errorf("20 notifications took %v while hooks are down", took)
	}
	d.Wake()
	checkfor.Eventually(t, func() error { return statsHold(d, "healthy", func(st HookStats) bool { return st.Cursor == 23 }) })

	// The outbox keeps what the down hooks have not had.
	if n := len(queued(t, s)); n != 23 {
		t.Errorf("%d notifications queued, want all 23 kept for the down hooks", n)
	}
	if st := statsOf(d, "failing"); st.Pending != 23 || st.Delivered != 0 {
		t.Errorf("failing stats = %+v, want 23 pending", st)
	}
	if st := statsOf(d, "healthy"); st.Pending != 0 || st.Delivered != 23 {
		t.Errorf("healthy stats = %+v", st)
	}
}

func TestRestartResumesFromCursor(t *testing.T) {
	clock := newClock()
	dir := t.TempDir()
	a := newReceiver(t, ok)
	var bDown atomic.Bool
	bDown.Store(true)
	b := newReceiver(t, func(received, int) answer {
		if bDown.Load() {
			return answer{status: http.StatusServiceUnavailable}
		}
		return answer{status: http.StatusOK}
	})
	hooks := []Hook{a.hook("a"), b.hook("b")}

	s1, err := ledger.Open(dir, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d1, stop1 := start(t, s1, testOptions(t, clock, hooks...))
	notify(t, s1, note(EventParked, "S", "1"), note(EventRetriesSpent, "S", "2"))
	d1.Wake()
	checkfor.Eventually(t, func() error { return a.countIs(2) })
	waitFailed(t, d1, "b", 1)
	checkfor.Eventually(t, func() error { return cursorAt(t, s1, "a", 2) })
	stop1()
	if err := s1.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	s2 := openStore(t, dir)
	if c := durableCursor(t, s2, "a"); c != 2 {
		t.Fatalf("a's cursor after reopening = %d, want 2", c)
	}
	if n := len(queued(t, s2)); n != 2 {
		t.Fatalf("%d notifications queued after reopening, want 2 (b has had none)", n)
	}
	bDown.Store(false)
	notify(t, s2, note(EventResumed, "S", "1"))
	d2, _ := start(t, s2, testOptions(t, clock, hooks...))
	d2.Wake()
	checkfor.Eventually(t, func() error { return outboxEmpty(t, s2) })
	settles(t, d2, "a", "nothing sent again to a", func() bool { return a.count() == 3 })
	if got := a.ids(); !slices.Equal(got, []string{"1", "2", "3"}) {
		t.Errorf("a got %v, want each notification once", got)
	}
	var bOK []string
	for _, r := range b.requests()[1:] { // the first failed in the first run
		bOK = append(bOK, r.payload.ID)
	}
	if !slices.Equal(bOK, []string{"1", "2", "3"}) || b.requests()[0].payload.ID != "1" {
		t.Errorf("b got %v, want 1 (failed), then 1, 2, 3", b.ids())
	}
	for _, name := range []string{"a", "b"} {
		if c := durableCursor(t, s2, name); c != 3 {
			t.Errorf("%s's cursor = %d, want 3", name, c)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	for _, c := range []struct {
		name   string
		status int
		value  func(now time.Time) string
		wait   time.Duration
	}{
		{"429 seconds", http.StatusTooManyRequests, func(time.Time) string { return "120" }, 120 * time.Second},
		{"503 date", http.StatusServiceUnavailable, func(now time.Time) string {
			return now.Add(90 * time.Second).UTC().Format(http.TimeFormat)
		}, 90 * time.Second},
		{"429 huge", http.StatusTooManyRequests, func(time.Time) string { return "999999" }, MaxRetryAfter},
		{"500 ignores it", http.StatusInternalServerError, func(time.Time) string { return "120" }, time.Second},
		{"503 malformed", http.StatusServiceUnavailable, func(time.Time) string { return "soon" }, time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			clock := newClock()
			s := openStore(t, t.TempDir())
			rc := newReceiver(t, func(_ received, nth int) answer {
				if nth == 1 {
					return answer{status: c.status, header: map[string]string{"Retry-After": c.value(clock.Now())}}
				}
				return answer{status: http.StatusOK}
			})
			d, _ := start(t, s, testOptions(t, clock, rc.hook("h")))
			notify(t, s, note(EventParked, "S", "x"))
			d.Wake()
			st := waitFailed(t, d, "h", 1)
			if want := clock.Now().Add(c.wait); !st.NextAttempt.Equal(want) {
				t.Fatalf("next attempt in %v, want %v", st.NextAttempt.Sub(clock.Now()), c.wait)
			}
			if c.wait > time.Second {
				clock.Advance(c.wait / 2) // far beyond the 1s backoff
				settles(t, d, "h", "no retry before Retry-After", func() bool { return rc.count() == 1 })
			}
			clock.Advance(c.wait)
			checkfor.Eventually(t, func() error { return statsHold(d, "h", func(st HookStats) bool { return st.Delivered == 1 }) })
		})
	}
}

func TestMaxAttemptsDrops(t *testing.T) {
	clock := newClock()
	s := openStore(t, t.TempDir())
	rc := newReceiver(t, func(r received, _ int) answer {
		if r.payload.ID == "1" {
			return answer{status: http.StatusBadRequest}
		}
		return answer{status: http.StatusOK}
	})
	var logs syncbuf.Buffer
	opts := testOptions(t, clock, rc.hook("h"))
	opts.MaxAttempts = 3
	opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	d, _ := start(t, s, opts)
	notify(t, s, note(EventParked, "S", "poison"), note(EventParked, "S", "fine"))
	d.Wake()

	for n := 1; n < 3; n++ {
		waitFailed(t, d, "h", n)
		clock.Advance(10 * time.Minute)
	}
	checkfor.Eventually(t, func() error {
		return statsHold(d, "h", func(st HookStats) bool { return st.Dropped == 1 && st.Delivered == 1 })
	})
	if got := rc.ids(); !slices.Equal(got, []string{"1", "1", "1", "2"}) {
		t.Errorf("requests %v, want 3 attempts of 1 then 2", got)
	}
	st := statsOf(d, "h")
	if st.FailedAttempts != 3 || st.Pending != 0 || st.Cursor != 2 {
		t.Errorf("stats = %+v", st)
	}
	out := logs.String()
	if !strings.Contains(out, "level=ERROR") || !strings.Contains(out, "delivery dropped") ||
		!strings.Contains(out, "aggregateId=poison") || !strings.Contains(out, "attempts=3") {
		t.Errorf("no error log of the drop:\n%s", out)
	}
	if strings.Contains(out, rc.srv.URL) {
		t.Errorf("the log holds the hook's URL:\n%s", out)
	}
	checkfor.Eventually(t, func() error { return outboxEmpty(t, s) })
}
