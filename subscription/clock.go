package subscription

import (
	"context"
	"sort"
	"sync"
	"time"
)

// Clock is the engine's source of time. Every wait that is part of the
// failure model (retry backoff, systemic probes, Retry-After, attempt
// timeouts, the long-horizon retries of parked aggregates) goes through it,
// so that tests can run hours of schedule in microseconds with a FakeClock.
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

// RealClock returns the wall clock.
func RealClock() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTimer(d time.Duration) Timer { return realTimer{t: time.NewTimer(d)} }

func (realClock) AfterFunc(d time.Duration, f func()) Timer {
	return realTimer{t: time.AfterFunc(d, f)}
}

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }
func (r realTimer) Stop() bool          { return r.t.Stop() }

// FakeClock is a Clock for tests: time stands still until Advance moves it,
// and Advance fires the timers that have come due, in time order. BlockUntil
// lets a test wait until the engine is parked on the clock (sleeping in a
// backoff, waiting for a probe or a parked retry) before it advances.
//
// Only NewTimer timers count as waiters (Waiters, BlockUntil, NextFire):
// AfterFunc timers are deadlines of running attempts, which nobody is
// blocked on, and counting them would make "the engine is waiting" racy.
type FakeClock struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*fakeTimer
	changed chan struct{} // closed and replaced whenever the timer set changes
}

// NewFakeClock returns a FakeClock standing at start.
func NewFakeClock(start time.Time) *FakeClock {
	return &FakeClock{now: start, changed: make(chan struct{})}
}

type fakeTimer struct {
	c      *FakeClock
	at     time.Time
	ch     chan time.Time
	fn     func()
	active bool
}

// Now returns the fake time.
func (f *FakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// NewTimer returns a timer that fires when the clock is advanced past d.
func (f *FakeClock) NewTimer(d time.Duration) Timer {
	t := &fakeTimer{c: f, ch: make(chan time.Time, 1)}
	f.add(t, d)
	return t
}

// AfterFunc calls fn in a new goroutine when the clock is advanced past d.
func (f *FakeClock) AfterFunc(d time.Duration, fn func()) Timer {
	t := &fakeTimer{c: f, fn: fn}
	f.add(t, d)
	return t
}

func (f *FakeClock) add(t *fakeTimer, d time.Duration) {
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
func (f *FakeClock) signal() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// Advance moves the clock forward by d and fires every timer due by then, in
// the order of their fire times.
func (f *FakeClock) Advance(d time.Duration) {
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
func (f *FakeClock) Waiters() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.waitersLocked()
}

func (f *FakeClock) waitersLocked() int {
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
func (f *FakeClock) NextFire() (time.Duration, bool) {
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
func (f *FakeClock) BlockUntil(ctx context.Context, n int) error {
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

// sleep waits d on c, or until ctx ends.
func sleep(ctx context.Context, c Clock, d time.Duration) error {
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
