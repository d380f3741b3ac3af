package sandbox

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berthhq/berth/internal/clock"
)

// pool holds a module's instances. An instance serves one call at a time
// (wazero instances must never be entered by two goroutines at once); the
// pool grows with demand up to its cap and shrinks as instances sit idle.
//
// WebAssembly memory only grows: an instance keeps the most its guest ever
// needed until it is closed. So the pool closes, instead of keeping, an
// instance whose memory after a call reached recycleBytes (an instance at
// its memory limit among them) or grew to recycleGrowth times what it had
// when it was made, and the janitor closes instances idle past the idle
// timeout; a burst of calls or a hostile guest pins no memory for longer
// than the call that needed it, and a guest whose heap creeps up call after
// call (a Go guest's does) starts again from its fresh size.
type pool struct {
	create       func(ctx context.Context, deadline time.Time) (*instance, error)
	stale        func(*instance) bool // made on a tier its module has left: close, never reuse
	cap          int                  // instances at most, in use, being made or idle
	recycleBytes uint64               // an instance this large after a call is closed
	// recycleGrowth: an instance whose memory after a call is this many
	// times its memory when made is closed (0: never, for growth alone).
	recycleGrowth float64
	clock         clock.Clock // the sandbox's, for idle times
	realClock     bool        // clock is the wall clock (clock.IsReal)

	// One lock guards the pool slots (busy) and the idle list together, so
	// that a call with no affinity key (affinity.go) touches one shared
	// cache line once to take an instance and once to return it.
	mu      sync.Mutex
	busy    int         // slots taken: instances in use, being made, or in an affinity slot
	idle    []*instance // most recently used last
	waiters []*waiter   // calls waiting for a slot, first come first served
	closed  bool
	counts  closeCounts

	// slots are the affinity keys' own places for idle instances
	// (affinity.go), one per instance the pool may hold; waiting counts the
	// calls that wait for a pool slot, and closedFlag is closed, for toSlot,
	// which takes no lock.
	slots      []slot
	waiting    atomic.Int32
	closedFlag atomic.Bool
}

// maxSlots bounds a pool's affinity slots (128 bytes each): keys past it
// share slots, as they do past the pool's size.
const maxSlots = 64

// waiter is a call waiting for a slot. put hands a slot to the first
// waiter by closing ready; the slot is then the waiter's.
type waiter struct {
	ready  chan struct{}
	handed bool // under pool.mu: ready was closed
}

// closeCounts counts the instances the pool closed, by reason.
type closeCounts struct {
	failed, memory, idle, tierUp int64
}

func newPool(size int, recycleBytes uint64, recycleGrowth float64, clk clock.Clock, create func(context.Context, time.Time) (*instance, error), stale func(*instance) bool) *pool {
	return &pool{create: create, stale: stale, cap: size, recycleBytes: recycleBytes, recycleGrowth: recycleGrowth,
		clock: clk, realClock: clock.IsReal(clk), slots: make([]slot, min(size, maxSlots))}
}

// acquire returns an idle instance or one made by create, waiting for a free
// slot when the pool is at its cap: until ctx ends, or until deadline
// passes when it is not zero (the sandbox's own deadline for the call).
//
// A free slot is taken without looking at ctx.Done: that would make the
// channel of a context that has none yet, on every call. A call under an
// affinity key takes the instance its key's slot holds first (affinity.go).
func (p *pool) acquire(ctx context.Context, deadline time.Time) (*instance, error) {
	i := p.slotOf(ctx)
	inst, err := p.acquireFor(ctx, deadline, i)
	if inst != nil {
		inst.slot = i
	}
	return inst, err
}

func (p *pool) acquireFor(ctx context.Context, deadline time.Time, i int) (*instance, error) {
	if i >= 0 {
		if inst, ok, err := p.fromSlot(ctx, deadline, i); ok {
			return inst, err
		}
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, ErrClosed
	}
	if p.busy < p.cap && len(p.waiters) == 0 {
		p.busy++
		return p.takeLocked(ctx, deadline)
	}
	// At the cap: count as waiting before looking at the slots (toSlot).
	p.waiting.Add(1)
	if inst := p.steal(); inst != nil {
		p.waiting.Add(-1)
		p.mu.Unlock()
		return p.holding(ctx, deadline, inst)
	}
	w := &waiter{ready: make(chan struct{})}
	p.waiters = append(p.waiters, w)
	p.mu.Unlock()
	if err := p.wait(ctx, w, deadline); err != nil {
		return nil, err
	}
	p.mu.Lock()
	if p.closed {
		p.busy--
		p.mu.Unlock()
		return nil, ErrClosed
	}
	return p.takeLocked(ctx, deadline)
}

// takeLocked takes an idle instance, or makes one (by deadline, when not
// zero), for a caller that holds a slot; it unlocks p.mu. An idle instance
// made on a tier its module has left is closed on the way, not used.
func (p *pool) takeLocked(ctx context.Context, deadline time.Time) (*instance, error) {
	var stale []*instance
	defer func() {
		for _, inst := range stale {
			inst.close()
		}
	}()
	for n := len(p.idle); n > 0; n-- {
		inst := p.idle[n-1]
		// Clear the slot: the backing array outlives the slice, and a stale
		// pointer there kept a closed instance's memory (up to its limit)
		// reachable until another instance was put in the same slot.
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		if p.stale(inst) {
			p.counts.tierUp++
			stale = append(stale, inst)
			continue
		}
		p.mu.Unlock()
		return inst, nil
	}
	if inst := p.steal(); inst != nil {
		// It holds a pool slot of its own: give back the one just taken.
		p.releaseLocked()
		p.mu.Unlock()
		return p.holding(ctx, deadline, inst)
	}
	p.mu.Unlock()
	inst, err := p.create(ctx, deadline)
	if err != nil {
		p.release()
		return nil, err
	}
	return inst, nil
}

// wait blocks until w is handed a slot, ctx ends or deadline passes. A
// waiter that gives up leaves the queue, or passes on a slot it was handed
// meanwhile.
func (p *pool) wait(ctx context.Context, w *waiter, deadline time.Time) error {
	var expired <-chan time.Time
	if !deadline.IsZero() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		expired = t.C
	}
	var err error
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-expired:
		err = context.DeadlineExceeded
	}
	p.mu.Lock()
	if w.handed {
		p.mu.Unlock()
		p.release()
		return err
	}
	if i := slices.Index(p.waiters, w); i >= 0 {
		p.waiters = slices.Delete(p.waiters, i, i+1)
		p.waiting.Add(-1)
	}
	p.mu.Unlock()
	return err
}

// release gives up a slot: to the first waiter, else back to the pool.
func (p *pool) release() {
	p.mu.Lock()
	p.releaseLocked()
	p.mu.Unlock()
}

func (p *pool) releaseLocked() {
	if len(p.waiters) > 0 && !p.closed {
		w := p.waiters[0]
		p.waiters[0] = nil
		p.waiters = p.waiters[1:]
		p.waiting.Add(-1)
		w.handed = true
		close(w.ready)
		return
	}
	p.busy--
}

// put returns an instance after a call. A broken instance (trapped, timed
// out, out of memory) is closed, never reused; so is one whose memory grew
// to recycleBytes or more, or to recycleGrowth times its size when made,
// since its memory would never shrink, and one made
// on a tier its module has left (the interpreter, once compiled code is
// ready). Instances idle when the module tiers up are closed by the switch
// (Module.tierUp); one a call took meanwhile is closed here or, if it was
// still idle, by takeLocked.
func (p *pool) put(inst *instance, broken bool) { p.putAt(inst, broken, time.Time{}) }

// putAt is put by a caller that has just read the wall clock, at end: on
// the real clock, the instance's idle time starts there, without a
// reading of its own (zero: read the pool's clock).
func (p *pool) putAt(inst *instance, broken bool, end time.Time) {
	var mem uint32
	if !broken {
		mem = inst.memoryBytes() // no call runs on inst now: safe to read
		inst.m.sawMemory(inst, mem)
	}
	var now time.Time
	var spare bool
	keep := !broken && p.reusable(inst, mem)
	if keep {
		now = end
		if !p.realClock || now.IsZero() {
			now = p.clock.Now()
		}
		if inst.slot >= 0 && !p.stale(inst) {
			inst.lastUsed = now
			inst.memBytes.Store(mem)
			if p.toSlot(inst) {
				return
			}
		}
	}
	p.mu.Lock()
	switch {
	case p.closed:
		keep = false
	case broken:
		p.counts.failed++
	case !keep:
		p.counts.memory++
		// Replaced for its growth, not for its size: its memory serves
		// the next instance (spareMemory).
		spare = uint64(mem) < p.recycleBytes
	case p.stale(inst):
		keep = false
		p.counts.tierUp++
	default:
		inst.lastUsed = now
		inst.memBytes.Store(mem)
		p.idle = append(p.idle, inst)
	}
	p.releaseLocked()
	p.mu.Unlock()
	if spare {
		inst.m.keepSpare(inst)
	}
	if !keep {
		inst.close()
	}
}

// reusable reports whether an instance whose memory after a call is mem
// may serve another call, by its memory: below recycleBytes and not grown
// past recycleGrowth. A group's replays (Replays) hold to it too.
func (p *pool) reusable(inst *instance, mem uint32) bool {
	return uint64(mem) < p.recycleBytes && !p.grown(inst, mem)
}

// grown reports whether an instance whose memory is now mem has grown past
// the pool's recycleGrowth over its memory when it was made.
func (p *pool) grown(inst *instance, mem uint32) bool {
	return p.recycleGrowth > 0 && float64(mem) >= p.recycleGrowth*float64(inst.newBytes)
}

// add puts a fresh instance into the idle list without a call (the probe
// instance made at load), if there is room.
func (p *pool) add(inst *instance) {
	p.mu.Lock()
	if p.closed || len(p.idle) >= p.cap {
		p.mu.Unlock()
		inst.close()
		return
	}
	inst.lastUsed = p.clock.Now()
	inst.memBytes.Store(inst.memoryBytes())
	p.idle = append(p.idle, inst)
	p.mu.Unlock()
}

// releaseIdle closes the instances last used before the cutoff and
// returns how many.
func (p *pool) releaseIdle(cutoff time.Time) int {
	return p.drop(func(inst *instance) bool { return inst.lastUsed.Before(cutoff) }, &p.counts.idle)
}

// drop closes the idle instances that match, counting them in count (a
// field of p.counts, written under p.mu), and returns how many.
func (p *pool) drop(match func(*instance) bool, count *int64) int {
	p.mu.Lock()
	var gone []*instance
	keep := p.idle[:0]
	for _, inst := range p.idle {
		if match(inst) {
			gone = append(gone, inst)
		} else {
			keep = append(keep, inst)
		}
	}
	clear(p.idle[len(keep):])
	p.idle = keep
	for i := range p.slots {
		s := &p.slots[i]
		inst := s.inst.Swap(nil)
		switch {
		case inst == nil:
		case match(inst):
			gone = append(gone, inst)
			p.releaseLocked() // the pool slot it held
		case !s.inst.CompareAndSwap(nil, inst):
			p.idle = append(p.idle, inst) // its key filled the slot meanwhile
			p.releaseLocked()
		}
	}
	*count += int64(len(gone))
	p.mu.Unlock()
	for _, inst := range gone {
		inst.close()
	}
	return len(gone)
}

// idleCount returns how many instances are idle.
func (p *pool) idleCount() int {
	var st Stats
	p.stats(&st)
	return st.Idle
}

// stats fills in what the pool knows of st: its idle instances, the memory
// they hold, and the instances it closed.
func (p *pool) stats(st *Stats) {
	p.mu.Lock()
	defer p.mu.Unlock()
	idle := func(inst *instance) {
		st.Idle++
		mem := uint64(inst.memBytes.Load())
		st.IdleMemoryBytes += mem
		st.MaxIdleMemoryBytes = max(st.MaxIdleMemoryBytes, mem)
	}
	for _, inst := range p.idle {
		idle(inst)
	}
	for i := range p.slots {
		if inst := p.slots[i].inst.Load(); inst != nil {
			idle(inst)
		}
	}
	st.ClosedFailed, st.ClosedMemory, st.ClosedIdle, st.ClosedTierUp = p.counts.failed, p.counts.memory, p.counts.idle, p.counts.tierUp
	st.RecycleMemoryBytes = p.recycleBytes
	st.RecycleGrowth = p.recycleGrowth
}

// close closes the idle instances; instances in use close when put back,
// and calls waiting for a slot end with ErrClosed.
func (p *pool) close() {
	p.mu.Lock()
	p.closed = true
	p.closedFlag.Store(true)
	idle := p.idle
	p.idle = nil
	for i := range p.slots {
		if inst := p.slots[i].inst.Swap(nil); inst != nil {
			idle = append(idle, inst)
		}
	}
	for _, w := range p.waiters {
		// A slot each, which the waiter gives back on finding the pool closed.
		p.busy++
		w.handed = true
		close(w.ready)
	}
	p.waiters = nil
	p.waiting.Store(0)
	p.mu.Unlock()
	for _, inst := range idle {
		inst.close()
	}
}
