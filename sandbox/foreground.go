package sandbox

import (
	"context"
	"sync"
	"time"
)

// Background compiles give way to the foreground (a Load, or what a
// caller marks with Sandbox.Foreground). A Go guest's compile
// takes seconds of every processor the compile's workers get, and an upload
// that came meanwhile (its rewrite, its interpreter compile, its first
// instance) waited for CPU: uploads one after another each took 3-5 times
// the first. So a background compile starts only once no Load
// has worked in the foreground for quietPeriod, and a Load that starts
// working cancels the one running, which starts again from the beginning
// once the foreground is quiet, until the work it lost so reaches
// maxGivenWay: then it runs to its end whatever comes. (A count of
// cancels would not do: the gaps between an operator's uploads, each
// upload's durable write among them, let a compile start, and be
// cancelled, after every one.)
const (
	quietPeriod = 200 * time.Millisecond
	maxGivenWay = 3 * time.Second
)

// foreground tracks the Loads working in the foreground and the background
// compile running, for the one to give way to the other.
type foreground struct {
	mu      sync.Mutex
	loading int       // Loads working in the foreground
	lastEnd time.Time // when the last of them ended
	quiet   chan struct{}
	// stop cancels the background compile running, if any may be
	// preempted (nil otherwise).
	stop context.CancelFunc

	preempted int // background compiles cancelled by a Load, for tests
}

func newForeground() *foreground { return &foreground{quiet: closedChan()} }

func closedChan() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

// enter marks a Load working in the foreground, cancelling the background
// compile running; the Load calls the returned func when it is done.
func (f *foreground) enter() (exit func()) {
	f.mu.Lock()
	if f.loading == 0 {
		f.quiet = make(chan struct{})
	}
	f.loading++
	if f.stop != nil {
		f.stop()
		f.stop = nil
		f.preempted++
	}
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		f.loading--
		if f.loading == 0 {
			f.lastEnd = time.Now()
			close(f.quiet)
		}
		f.mu.Unlock()
	}
}

// waitQuiet returns once no Load has worked in the foreground for
// quietPeriod; false if ctx ended first.
func (f *foreground) waitQuiet(ctx context.Context) bool {
	for {
		f.mu.Lock()
		loading, quiet, wait := f.loading, f.quiet, quietPeriod-time.Since(f.lastEnd)
		f.mu.Unlock()
		if loading > 0 {
			select {
			case <-quiet:
				continue // read lastEnd again
			case <-ctx.Done():
				return false
			}
		}
		if wait <= 0 {
			return true
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false
		}
	}
}

// start registers a background compile about to run, which a Load that
// enters cancels through stop (nil: it may not be preempted); false, and
// nothing registered, if a Load is working now.
func (f *foreground) start(stop context.CancelFunc) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.loading > 0 {
		return false
	}
	f.stop = stop
	return true
}

// done unregisters the background compile started with start.
func (f *foreground) done() {
	f.mu.Lock()
	f.stop = nil
	f.mu.Unlock()
}

// Foreground marks work in the foreground that background compiles give
// way to, as they do to a Load's (an upload: its Load, its durable write,
// its subscriptions, as one); call the returned func when it is done.
func (s *Sandbox) Foreground() (done func()) { return s.fg.enter() }
