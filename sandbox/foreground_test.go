package sandbox

import (
	"context"
	"testing"
	"time"
)

// TestForegroundQuiet: a background compile waits until no Load has
// worked for quietPeriod (counted from the last one's end, not from
// before it), may not start while a Load works, and is cancelled by a
// Load that enters while it runs.
func TestForegroundQuiet(t *testing.T) {
	f := newForeground()
	if !f.waitQuiet(t.Context()) {
		t.Fatal("waitQuiet with no Load ever: false")
	}
	exit := f.enter()
	if f.start(func() {}) {
		t.Error("a background compile started while a Load works")
	}
	quiet := make(chan time.Time)
	go func() {
		f.waitQuiet(context.Background())
		quiet <- time.Now()
	}()
	ended := time.Now() // before the Load's end: what waitQuiet counts from is later
	exit()
	if waited := (<-quiet).Sub(ended); waited < quietPeriod {
		t.Errorf("waitQuiet returned %v after the Load's end, want %v at least", waited, quietPeriod)
	}

	stopped := false
	if !f.start(func() { stopped = true }) {
		t.Fatal("a background compile may not start with the foreground quiet")
	}
	f.enter()()
	if !stopped || f.preempted != 1 {
		t.Errorf("a Load entering: compile stopped %v, %d preempted; want it stopped, 1", stopped, f.preempted)
	}
	f.done()
}
