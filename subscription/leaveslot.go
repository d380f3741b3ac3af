package subscription

import "context"

// LeaveSlot tells the engine that the attempt whose context is ctx waits,
// from now on until its Invoke returns, for something other than its
// handler: a store making the call's writes durable, say. The partition's
// slot the attempt holds then goes to another aggregate meanwhile, so that
// the wait is shared by more calls instead of holding the partition's
// concurrency; the attempt takes its slot back when Invoke returns, before
// its outcome is settled. The aggregate stays busy throughout: none of its
// later events starts until this one is settled, so its order holds.
//
// It reports false, and the attempt keeps its slot, when ctx is not a live
// delivery's (a replay or a long-horizon retry holds no slot) or when as
// many attempts of the partition as its concurrency wait off their slots
// already: what waits is bounded, so a partition has at most twice its
// concurrency of calls in flight.
func LeaveSlot(ctx context.Context) bool {
	c, _ := ctx.Value(attemptKey{}).(*attemptCtx)
	if c == nil || c.slot == nil || !c.left.CompareAndSwap(false, true) {
		return false
	}
	if !c.slot.leaveSlot() {
		c.left.Store(false)
		return false
	}
	return true
}

// leaveSlot gives a slot up for an attempt that waits off it, unless max
// attempts wait so already.
func (p *partition) leaveSlot() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.offSlot >= p.max {
		return false
	}
	p.offSlot++
	p.releaseLocked()
	return true
}

// backOnSlot takes a slot again for an attempt that left its own
// (leaveSlot), once its Invoke has returned: at once, even when that puts
// the partition over its limit, as backpressure lowering the limit does;
// the worker gives the slot back after its commit when others wait. It
// does not wait for a slot to free: during a systemic pause the probe
// leaves its slot too, and the workers waiting for the probe's outcome
// hold theirs, so a probe waiting for a slot would wait for ever.
func (p *partition) backOnSlot() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.offSlot--
	p.running++
}

// releaseLocked gives a slot back in the middle of a commit and starts
// what waits for it; p.mu held.
func (p *partition) releaseLocked() {
	p.running--
	p.slotFreedLocked()
	p.fill()
}
