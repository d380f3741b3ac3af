package subscription

import (
	"context"
	"hash/crc32"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/internal/affinity"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/retry"
)

// aggKey names an aggregate.
type aggKey struct{ typ, id string }

func (k aggKey) String() string { return k.typ + "/" + k.id }

// partitionOf returns the aggregate's partition; nil when another host owns
// it.
func (r *run) partitionOf(k aggKey) *partition {
	return r.parts[eventlog.PartitionOf(k.typ, k.id, len(r.parts))]
}

// livePartition returns the aggregate's partition while this host works on
// it: nil when another host owns it, or took it from this one (fenced).
func (r *run) livePartition(k aggKey) *partition {
	if p := r.partitionOf(k); p != nil && !p.isFenced() {
		return p
	}
	return nil
}

// partition handles the aggregates that hash to it: up to limit of them at
// once, each strictly in version order. It also carries the partition-wide
// failure state: a systemic pause and the concurrency lowered by
// backpressure.
//
// Slots, all under mu:
//
//   - A slot is held by a worker (work), the one goroutine delivering a live
//     aggregate's queued commits; a.running says the aggregate has one, and
//     stays true for as long as that worker lives, so no second worker ever
//     starts for it. running counts the slots held. A replay (a resume's, or
//     the host's after an outage) and a long-horizon retry hold none.
//   - A worker gives its slot back when it ends: its aggregate is no longer
//     live (parked, or resuming), its queue is empty, the run stops, the
//     partition is over its limit, or, after a commit, others wait (ready or
//     slotWaiters); a live aggregate with work left rejoins ready. In the
//     middle of a commit it gives the slot up only for a backoff or a
//     Retry-After (waitOff), and then counts in slotWaiters until it takes
//     one again; fill leaves room for slotWaiters before it starts anyone
//     from ready, so a retry is not starved by the neighbours it let by. A
//     worker waiting out a systemic pause or an operator's pause (awaitTurn)
//     or writing its park keeps its slot: nobody else could deliver either.
//   - An aggregate is in ready (a.queued) or held by a worker, never both;
//     schedule and fill start workers while running+slotWaiters < limit;
//     a worker that gives its slot back hands it on to the first ready
//     aggregate fill would start, and delivers it itself; a worker with
//     none waits (holding no slot) to be handed the next one started
//     (worker.go). Every release closes slotFreed while anyone counts in
//     slotWaiters.
//   - An attempt waiting for a store gives its slot up the same way
//     (LeaveSlot, leaveslot.go), counting in offSlot, at most max of them,
//     and takes it back at once when its Invoke returns, over the limit if
//     need be (backOnSlot), to give it back after its commit.
//   - Backpressure lowers limit (halving it, at least 1) without taking a
//     slot from anyone: running may exceed limit until workers see it after
//     their current commit and stop; each success raises limit by one, up to
//     max, and fills the room made.
type partition struct {
	r   *run
	idx int
	// epoch is the epoch this host owns the partition at (0 on a single
	// host), which fences its transactions (fence.go).
	epoch uint64
	// ctx is the partition's part of the run: every delivery, replay,
	// park and retry of the partition works under it, and fencing cancels
	// it alone.
	ctx     context.Context
	cancel  context.CancelFunc
	fenced  atomic.Bool
	tracker *tracker // the partition's checkpoint

	mu      sync.Mutex
	aggs    map[aggKey]*aggState
	held    int         // of aggs, those in modeHeld (setMode): a status reads it, not aggs
	ready   []*aggState // aggregates with work waiting for a slot, in order
	running int         // slots taken
	// slotWaiters are aggregates back from a backoff waiting to take a slot
	// again: fill leaves room for them first, so that a retry is not starved
	// by the neighbours it let go ahead.
	slotWaiters int
	slotFreed   chan struct{} // closed and replaced when a slot frees
	// offSlot counts the attempts that gave their slot up while they wait
	// for a store (LeaveSlot), at most max.
	offSlot int
	// idle counts the workers waiting, with no slot, for handoff to give
	// them the next aggregate started (worker.go).
	idle    int
	handoff chan *aggState // capacity max
	limit   int            // current concurrency (lowered by backpressure)
	max     int            // configured concurrency

	// Systemic pause: while paused, only one attempt at a time runs (the
	// probe), after a backoff that grows with each failed probe.
	paused        bool
	probing       bool
	probeFailures int
	nextProbe     time.Time
	pausedSince   time.Time
	resumedAt     time.Time // when the last systemic pause ended
	pauseReason   string
	storePaused   bool          // the pause is the ledger's refusing writes (storefull.go)
	changed       chan struct{} // closed and replaced when the pause state changes
	detector      *retry.Detector
	// Outages the detector recognised, so that the failures that revealed
	// one are refunded (outage.go): how many, when the latest began, and a
	// channel closed and replaced when one begins.
	outages  uint64
	outageAt time.Time
	outageCh chan struct{}
	// parks are the parks on a spent budget whose failures are still in the
	// detector's window, in the order they were made: an outage they
	// revealed takes them back (outage_park.go).
	parks []parkWatch
	// notes are the outage's notifications still to write, in order, by
	// the one goroutine noting runs (notes.go).
	notes  []ledger.Notification
	noting bool
}

func newPartition(r *run, idx int, st partStart) *partition {
	ctx, cancel := context.WithCancel(r.ctx)
	// Its attempts mostly follow one another: the sandbox keeps them an
	// instance of their own (internal/affinity). The subscription's name
	// spreads the partitions of a module's handlers over different keys.
	ctx = affinity.With(ctx, idx+int(crc32.ChecksumIEEE([]byte(r.s.name))&0xffff))
	return &partition{
		r: r, idx: idx, epoch: st.epoch, ctx: ctx, cancel: cancel, tracker: newTracker(st.from),
		aggs:  map[aggKey]*aggState{},
		limit: r.e.opts.Concurrency, max: r.e.opts.Concurrency,
		changed: make(chan struct{}), slotFreed: make(chan struct{}), outageCh: make(chan struct{}),
		handoff:  make(chan *aggState, r.e.opts.Concurrency),
		detector: retry.NewDetector(r.e.opts.Systemic),
	}
}

// agg returns the aggregate's state, creating it; p.mu held or not yet
// shared.
// setMode moves a to mode m, counting the held aggregates; p.mu held
// (or the partition not yet running).
func (p *partition) setMode(a *aggState, m mode) {
	if a.mode == modeHeld {
		p.held--
	}
	if m == modeHeld {
		p.held++
	}
	a.mode = m
}

func (p *partition) agg(k aggKey) *aggState {
	a := p.aggs[k]
	if a == nil {
		a = &aggState{key: k}
		p.aggs[k] = a
	}
	return a
}

// dispatch takes a commit from the reader.
func (p *partition) dispatch(k aggKey, c eventlog.Commit) {
	p.mu.Lock()
	defer p.mu.Unlock()
	a := p.agg(k)
	switch a.mode {
	case modeHeld:
		// Parked: the commit is not delivered now but read again from the
		// aggregate's stream when it resumes, so the checkpoint may pass it.
		p.finished(c.Position)
		p.forget(a)
		return
	case modeReplaying:
		// The replay decides at its end which of these it already handled.
		a.queue = append(a.queue, c)
		return
	}
	if a.floor != 0 {
		if c.Version <= a.floor {
			// Already handled by a replay, or skipped by an operator.
			p.finished(c.Position)
			p.forget(a)
			return
		}
		a.floor = 0
	}
	a.queue = append(a.queue, c)
	p.schedule(a)
}

// schedule gives a live aggregate with work a slot, or queues it for one;
// p.mu held.
func (p *partition) schedule(a *aggState) {
	if a.running || a.queued || len(a.queue) == 0 || a.mode != modeLive {
		return
	}
	if p.running+p.slotWaiters < p.limit {
		p.startLocked(a)
		return
	}
	a.queued = true
	p.ready = append(p.ready, a)
}

// forget drops the state of an aggregate that has nothing left to remember;
// p.mu held.
func (p *partition) forget(a *aggState) {
	if a.mode == modeLive && !a.running && !a.queued && len(a.queue) == 0 && a.floor == 0 {
		delete(p.aggs, a.key)
	}
}

// lowerConcurrency halves the partition's concurrency (at least 1) after a
// backpressure failure; successes raise it again by one each.
func (p *partition) lowerConcurrency() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.limit = max(1, p.limit/2)
}

// slotFreedLocked wakes aggregates waiting to take a slot again; p.mu held.
// Only waitOff waits on slotFreed, and it counts itself in slotWaiters
// before it looks, so with none counted there is nobody to wake (and no
// channel to make for every slot given back).
func (p *partition) slotFreedLocked() {
	if p.slotWaiters == 0 {
		return
	}
	close(p.slotFreed)
	p.slotFreed = make(chan struct{})
}

// waitOff sleeps d on the clock without holding a slot: an aggregate in its
// backoff (or waiting out a Retry-After) must not keep its neighbours from
// being handled, whatever the concurrency. The aggregate itself stays busy,
// so none of its later events starts meanwhile. live says the caller holds
// a slot (a replay does not). An outage the detector recognises meanwhile
// calls onOutage (see backoff).
func (p *partition) waitOff(ctx context.Context, d time.Duration, live bool, onOutage func()) error {
	if !live {
		return p.backoff(ctx, d, onOutage)
	}
	p.mu.Lock()
	p.releaseLocked()
	p.mu.Unlock()
	err := p.backoff(ctx, d, onOutage)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		// Keep the books straight for the worker, which gives the slot back.
		p.running++
		return err
	}
	p.slotWaiters++
	defer func() { p.slotWaiters-- }()
	for p.running >= p.limit {
		ch, outage := p.slotFreed, p.outageCh
		p.mu.Unlock()
		onOutage() // one recognised before the signal was taken
		select {
		case <-ch:
		case <-outage:
			onOutage()
		case <-ctx.Done():
		}
		p.mu.Lock()
		if ctx.Err() != nil {
			p.running++
			return ctx.Err()
		}
	}
	p.running++
	return nil
}
