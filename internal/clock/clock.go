// Package clock is the host's one source of time: the Clock every part
// that waits or reads the time is given (the engine's backoffs, probes and
// parked retries; leases and duties; jobs; webhooks; the sandbox's idle
// instances), the wall clock (Real) and a Fake for tests, which stands
// still until Advance moves it.
package clock

import (
	"context"
	"sort"
	"sync"
	"time"
)

// Clock is a source of time. Every wait that is part of the
// failure model (retry backoff, systemic probes, Retry-After, attempt
// timeouts, the long-horizon retries of parked aggregates) goes through it,
// so that tests can run hours of schedule in microseconds with a Fake.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTimer returns a timer that fires once after d.
	NewTimer(d time.Duration) Timer
	// AfterFunc calls f in its own goroutine after d, unless stopped first.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a single-shot timer of a Clock.
type Timer interface {
	// C is the channel the fire time is sent on (nil for AfterFunc timers).
	C() <-chan time.Time
	// Stop prevents the timer from firing; false if it already fired or was
	// stopped.
	Stop() bool
}

// Real returns the wall clock.
func Real() Clock { return realClock{} }

type realClock struct{}

// IsReal reports whether c is the wall clock (Real), so that a reading of
// time.Now a caller made anyway can stand for c.Now().
func IsReal(c Clock) bool {
	_, ok := c.(realClock)
	return ok
}

// Until is t.Sub(c.Now()). On the wall clock, for a t read from it, it is
// time.Until: the monotonic clock alone, one clock read where Now makes two.
func Until(c Clock, t time.Time) time.Duration {
	if IsReal(c) {
		return time.Until(t)
	}
	return t.Sub(c.Now())
}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTimer(d time.Duration) Timer { return realTimer{t: time.NewTimer(d)} }

func (realClock) AfterFunc(d time.Duration, f func()) Timer {
	return realTimer{t: time.AfterFunc(d, f)}
}

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }
func (r realTimer) Stop() bool          { return r.t.Stop() }

// Fake is a Clock for tests: time stands still until Advance moves it,
// and Advance fires the timers that have come due, in time order. BlockUntil
// lets a test wait until the engine is parked on the clock (sleeping in a
// backoff, waiting for a probe or a parked retry) before it advances.
//
// Only NewTimer timers count as waiters (Waiters, BlockUntil, NextFire):
// AfterFunc timers are deadlines of running attempts, which nobody is
// blocked on, and counting them would make "the engine is waiting" racy.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*fakeTimer
	changed chan struct{} // closed and replaced whenever the timer set changes
}

// Pending returns how many timers of either kind (NewTimer, AfterFunc)
// have neither fired nor been stopped: a test's check that nothing was
// left behind on the clock.
func (f *Fake) Pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

// NewFake returns a Fake standing at start.
func NewFake(start time.Time) *Fake {
	return &Fake{now: start, changed: make(chan struct{})}
}

type fakeTimer struct {
	c      *Fake
	at     time.Time
	ch     chan time.Time
	fn     func()
	active bool
}

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// NewTimer returns a timer that fires when the clock is advanced past d.
func (f *Fake) NewTimer(d time.Duration) Timer {
	t := &fakeTimer{c: f, ch: make(chan time.Time, 1)}
	f.add(t, d)
	return t
}

// AfterFunc calls fn in a new goroutine when the clock is advanced past d.
func (f *Fake) AfterFunc(d time.Duration, fn func()) Timer {
	t := &fakeTimer{c: f, fn: fn}
	f.add(t, d)
	return t
}

func (f *Fake) add(t *fakeTimer, d time.Duration) {
	f.mu.Lock()
	t.at = f.now.Add(d)
	if d <= 0 {
		now := f.now
		f.mu.Unlock()
		t.fire(now)
		return
	}
	t.active = true
	f.timers = append(f.timers, t)
	f.signal()
	f.mu.Unlock()
}

func (t *fakeTimer) fire(now time.Time) {
	if t.fn != nil {
		go t.fn()
		return
	}
	t.ch <- now
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	f := t.c
	f.mu.Lock()
	defer f.mu.Unlock()
	if !t.active {
		return false
	}
	t.active = false
	for i, x := range f.timers {
		if x == t {
			f.timers = append(f.timers[:i], f.timers[i+1:]...)
			break
		}
	}
	f.signal()
	return true
}

// signal wakes BlockUntil callers; f.mu must be held.
func (f *Fake) signal() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// Advance moves the clock forward by d and fires every timer due by then, in
// the order of their fire times.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	now := f.now
	var due, keep []*fakeTimer
	for _, t := range f.timers {
		if !t.at.After(now) {
			t.active = false
			due = append(due, t)
		} else {
			keep = append(keep, t)
		}
	}
	f.timers = keep
	if len(due) > 0 {
		f.signal()
	}
	f.mu.Unlock()
	sort.SliceStable(due, func(i, j int) bool { return due[i].at.Before(due[j].at) })
	for _, t := range due {
		t.fire(now)
	}
}

// Waiters returns the number of NewTimer timers waiting to fire.
func (f *Fake) Waiters() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.waitersLocked()
}

func (f *Fake) waitersLocked() int {
	n := 0
	for _, t := range f.timers {
		if t.fn == nil {
			n++
		}
	}
	return n
}

// NextFire returns how long until the earliest pending NewTimer timer
// fires, false if none is pending.
func (f *Fake) NextFire() (time.Duration, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var at time.Time
	found := false
	for _, t := range f.timers {
		if t.fn == nil && (!found || t.at.Before(at)) {
			at, found = t.at, true
		}
	}
	return at.Sub(f.now), found
}

// BlockUntil waits until at least n NewTimer timers are waiting to fire, or
// ctx ends.
func (f *Fake) BlockUntil(ctx context.Context, n int) error {
	for {
		f.mu.Lock()
		if f.waitersLocked() >= n {
			f.mu.Unlock()
			return nil
		}
		ch := f.changed
		f.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Sleep waits d on c, or until ctx ends.
func Sleep(ctx context.Context, c Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
