package subscription

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// The lease fence: in a cluster, this host may act for its partitions only
// while its membership lease is valid, and the cluster (which renews it)
// tells the engine until when that is (SetLease). Every handler call checks
// it right before it starts (run.invoke), on the engine's clock, so the
// moment the lease may have run out every partition of every subscription
// stops calling at once: no stop of a subscription, no checkpoint write,
// nothing that may block on an unreachable store comes first. A process
// woken from SIGSTOP sees it too, since the check reads the clock (whose
// monotonic reading includes the stopped time) rather than waiting for a
// timer. A call refused waits for the lease to be renewed or for its run to
// stop (the cluster gives the partitions up next): it is neither made,
// counted nor charged.
//
// The ledger's epochs still fence every write (fence.go); the lease fences
// what the ledger cannot see, the handlers' side effects.

// hostLease is the engine's copy of the lease: until when it lets the host
// act. The zero value fences nothing (a single host, or a cluster that has
// not told the engine yet).
type hostLease struct {
	// until is the lease's end as nanoseconds after base on the engine's
	// clock; 0: no lease set (nothing fenced).
	until atomic.Int64
	base  time.Time // the engine clock's Now when Open ran

	mu      sync.Mutex
	changed chan struct{} // closed and replaced when until changes
	told    bool          // the lapse of the current lease was logged
	lapses  atomic.Uint64 // leases that ran out with a call waiting
	waiting atomic.Int64  // calls waiting for the lease now
}

// SetLease tells the engine until when, on its clock, this host's lease
// lets it act: no handler call starts at or after until. Each confirmed
// renewal of the lease moves it on; a lease found lost sets it to now. The
// cluster (package cluster) calls it; a single host never does, and then
// nothing is fenced. The cluster and the engine must share a clock
// (Options.Clock), until being a reading of it.
func (e *Engine) SetLease(until time.Time) {
	l := &e.lease
	ns := max(until.Sub(l.base).Nanoseconds(), 1) // 0 means unset
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.until.Load() == ns {
		return
	}
	l.until.Store(ns)
	l.told = false
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
}

// LeaseValid reports whether the lease lets the host act now (always true
// when none was set).
func (e *Engine) LeaseValid() bool { return e.leaseValidAt(e.clock.Now()) }

// leaseValidAt is LeaseValid at now, a reading of the engine's clock.
func (e *Engine) leaseValidAt(now time.Time) bool {
	u := e.lease.until.Load()
	return u == 0 || now.Sub(e.lease.base).Nanoseconds() < u
}

// LeaseStats are the lease fence's counters.
type LeaseStats struct {
	// Lapses counts leases that ran out while a handler call was due: the
	// calls waited, none was made.
	Lapses uint64
	// Waiting is the number of handler calls waiting for the lease now.
	Waiting int64
}

// LeaseStats returns the lease fence's counters.
func (e *Engine) LeaseStats() LeaseStats {
	return LeaseStats{Lapses: e.lease.lapses.Load(), Waiting: e.lease.waiting.Load()}
}

// awaitLease returns nil at once while the lease is valid at now, the
// caller's reading of the engine's clock taken right before (an atomic
// load and a subtraction), else waits until a renewal makes it valid again
// or ctx ends (ctx's error).
func (e *Engine) awaitLease(ctx context.Context, now time.Time) error {
	if e.leaseValidAt(now) {
		return nil
	}
	l := &e.lease
	l.waiting.Add(1)
	defer l.waiting.Add(-1)
	for {
		l.mu.Lock()
		if e.LeaseValid() {
			l.mu.Unlock()
			return nil
		}
		if !l.told {
			l.told = true
			l.lapses.Add(1)
			e.logger.Warn("lease fence: this host's cluster lease may have run out; no handler call starts until it is renewed",
				"host", e.opts.Host)
		}
		if l.changed == nil {
			l.changed = make(chan struct{})
		}
		ch := l.changed
		l.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
