package sandbox

import (
	"context"
	"runtime/debug"
	"sync/atomic"
	"time"
)

// freeInterval is the least time between two returns of memory to the OS:
// each is a whole collection, and the frees that ask for one come in
// bursts (a pool's idle instances, a tier-up's interpreter form).
const freeInterval = time.Second

// osMemory gives the memory the sandbox lets go of back to the OS.
//
// What a module frees is large and comes at once: its interpreter form
// when it tiers up (~60 MiB of heap for a Go guest), its instances' linear
// memories when a burst's pool goes idle or the module is closed. An idle
// host allocates nearly nothing after that, so the Go runtime starts no
// collection that would find this memory free, and its scavenger keeps
// what the last heap goal allowed: the process would hold the peak of its
// uploads and bursts for good (878 MiB for six idle Go modules, 188 MiB
// once given back). So the sandbox asks for a collection and a
// return to the OS (debug.FreeOSMemory) after such a release, at most once
// a freeInterval, from a goroutine of its own, once the foreground is
// quiet: an upload that lets go of the earlier modules' interpreter forms
// (letFormsGo) reuses that memory, where one given back would be faulted
// in again.
type osMemory struct {
	// quiet waits until no upload works in the foreground (nil: no wait);
	// false if ctx ended first.
	quiet   func(ctx context.Context) bool
	kick    chan struct{} // a return is wanted; holds one request at most
	done    chan struct{} // closed when the goroutine has ended
	returns atomic.Int64  // returns made, for tests
}

func newOSMemory() *osMemory {
	return &osMemory{kick: make(chan struct{}, 1), done: make(chan struct{})}
}

// release asks for the memory just freed to go back to the OS soon.
func (o *osMemory) release() {
	select {
	case o.kick <- struct{}{}:
	default: // one is pending already; it will cover this one
	}
}

// run returns memory as asked until ctx ends.
func (o *osMemory) run(ctx context.Context) {
	defer close(o.done)
	for {
		select {
		case <-ctx.Done():
			return
		case <-o.kick:
		}
		if o.quiet != nil && !o.quiet(ctx) {
			return
		}
		debug.FreeOSMemory()
		o.returns.Add(1)
		select {
		case <-ctx.Done():
			return
		case <-time.After(freeInterval):
		}
	}
}
