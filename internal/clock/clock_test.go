package clock

import (
	"context"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// TestFakeFiresDueTimersInOrder checks that time stands still until
// Advance, which fires exactly the timers due, in the order of their fire
// times, and that a stopped timer never fires.
func TestFakeFiresDueTimersInOrder(t *testing.T) {
	f := NewFake(t0)
	late, early, stopped, far := f.NewTimer(2*time.Second), f.NewTimer(time.Second), f.NewTimer(time.Second), f.NewTimer(time.Hour)
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop: want true once, then false")
	}
	if f.Waiters() != 3 || f.Pending() != 3 {
		t.Fatalf("Waiters %d, Pending %d, want 3 and 3", f.Waiters(), f.Pending())
	}
	if d, ok := f.NextFire(); !ok || d != time.Second {
		t.Fatalf("NextFire = %v, %v, want 1s", d, ok)
	}
	f.Advance(2 * time.Second)
	if got := f.Now(); !got.Equal(t0.Add(2 * time.Second)) {
		t.Fatalf("Now = %v", got)
	}
	for name, tm := range map[string]Timer{"1s": early, "2s": late} {
		select {
		case at := <-tm.C():
			if !at.Equal(t0.Add(2 * time.Second)) {
				t.Errorf("%s timer fired with %v, want the clock's time", name, at)
			}
		default:
			t.Errorf("the %s timer did not fire", name)
		}
	}
	select {
	case <-stopped.C():
		t.Error("a stopped timer fired")
	case <-far.C():
		t.Error("a timer not yet due fired")
	default:
	}
	if f.Pending() != 1 || far.Stop() != true || f.Pending() != 0 {
		t.Error("the hour timer is not the one left pending")
	}
}

// TestFakeAfterFuncIsNotAWaiter checks that an AfterFunc timer runs its
// function when due, and that BlockUntil and Waiters count only NewTimer
// timers (AfterFunc ones are deadlines nobody waits on).
func TestFakeAfterFuncIsNotAWaiter(t *testing.T) {
	f := NewFake(t0)
	ran := make(chan struct{})
	f.AfterFunc(time.Minute, func() { close(ran) })
	if f.Waiters() != 0 || f.Pending() != 1 {
		t.Fatalf("Waiters %d, Pending %d, want 0 and 1", f.Waiters(), f.Pending())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	slept := make(chan error, 1)
	go func() { slept <- Sleep(ctx, f, 30*time.Second) }()
	if err := f.BlockUntil(ctx, 1); err != nil {
		t.Fatalf("BlockUntil: %v", err)
	}
	f.Advance(time.Minute)
	select {
	case <-ran:
	case <-ctx.Done():
		t.Fatal("the AfterFunc did not run")
	}
	if err := <-slept; err != nil {
		t.Errorf("Sleep on the fake clock = %v", err)
	}
}

// TestSleepEndsWithItsContext checks Sleep returns ctx's error when ctx
// ends first, and at once for a zero wait.
func TestSleepEndsWithItsContext(t *testing.T) {
	f := NewFake(t0)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, f, time.Hour); err != context.Canceled {
		t.Errorf("Sleep after cancel = %v", err)
	}
	if err := Sleep(context.Background(), f, 0); err != nil {
		t.Errorf("Sleep(0) = %v", err)
	}
	if f.Pending() != 0 {
		t.Errorf("%d timers left behind", f.Pending())
	}
	if got := Until(f, t0.Add(time.Minute)); got != time.Minute {
		t.Errorf("Until = %v", got)
	}
	if !IsReal(Real()) || IsReal(f) {
		t.Error("IsReal")
	}
}
