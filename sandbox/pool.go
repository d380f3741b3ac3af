package sandbox

import (
	"context"
	"sync"
	"time"
)

// pool holds a module's instances. An instance serves one call at a time
// (wazero instances must never be entered by two goroutines at once); the
// pool grows with demand up to its cap and shrinks as instances sit idle.
//
// WebAssembly memory only grows: an instance keeps the most its guest ever
// needed until it is closed. So the pool closes, instead of keeping, an
// instance whose memory after a call reached recycleBytes (an instance at
// its memory limit among them), and the janitor closes instances idle past
// the idle timeout; a burst of calls or a hostile guest pins no memory for
// longer than the call that needed it.
type pool struct {
	sem          chan struct{}    // one token per instance in use or being created
	recycleBytes uint64           // an instance this large after a call is closed
	now          func() time.Time // the sandbox's clock, for idle times

	mu     sync.Mutex
	idle   []*instance // most recently used last
	closed bool
	counts closeCounts
}

// closeCounts counts the instances the pool closed, by reason.
type closeCounts struct {
	failed, memory, idle int64
}

func newPool(size int, recycleBytes uint64, now func() time.Time) *pool {
	return &pool{sem: make(chan struct{}, size), recycleBytes: recycleBytes, now: now}
}

// acquire returns an idle instance or one made by create, waiting for a free
// slot when the pool is at its cap.
func (p *pool) acquire(ctx context.Context, create func(context.Context) (*instance, error)) (*instance, error) {
	select {
	case p.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		<-p.sem
		return nil, ErrClosed
	}
	if n := len(p.idle); n > 0 {
		inst := p.idle[n-1]
		// Clear the slot: the backing array outlives the slice, and a stale
		// pointer there kept a closed instance's memory (up to its limit)
		// reachable until another instance was put in the same slot.
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return inst, nil
	}
	p.mu.Unlock()
	inst, err := create(ctx)
	if err != nil {
		<-p.sem
		return nil, err
	}
	return inst, nil
}

// put returns an instance after a call. A broken instance (trapped, timed
// out, out of memory) is closed, never reused; so is one whose memory grew
// to recycleBytes or more, since its memory would never shrink.
func (p *pool) put(inst *instance, broken bool) {
	var mem uint32
	if !broken {
		mem = inst.memoryBytes() // no call runs on inst now: safe to read
	}
	p.mu.Lock()
	switch {
	case p.closed:
		p.mu.Unlock()
		inst.close()
	case broken:
		p.counts.failed++
		p.mu.Unlock()
		inst.close()
	case uint64(mem) >= p.recycleBytes:
		p.counts.memory++
		p.mu.Unlock()
		inst.close()
	default:
		inst.lastUsed = p.now()
		inst.memBytes = mem
		p.idle = append(p.idle, inst)
		p.mu.Unlock()
	}
	<-p.sem
}

// add puts a fresh instance into the idle list without a call (the probe
// instance made at load), if there is room.
func (p *pool) add(inst *instance) {
	p.mu.Lock()
	if p.closed || len(p.idle) >= cap(p.sem) {
		p.mu.Unlock()
		inst.close()
		return
	}
	inst.lastUsed = p.now()
	inst.memBytes = inst.memoryBytes()
	p.idle = append(p.idle, inst)
	p.mu.Unlock()
}

// releaseIdle closes the instances last used before the cutoff.
func (p *pool) releaseIdle(cutoff time.Time) {
	p.mu.Lock()
	var stale []*instance
	keep := p.idle[:0]
	for _, inst := range p.idle {
		if inst.lastUsed.Before(cutoff) {
			stale = append(stale, inst)
		} else {
			keep = append(keep, inst)
		}
	}
	clear(p.idle[len(keep):])
	p.idle = keep
	p.counts.idle += int64(len(stale))
	p.mu.Unlock()
	for _, inst := range stale {
		inst.close()
	}
}

// idleCount returns how many instances are idle.
func (p *pool) idleCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}

// stats fills in what the pool knows of st: its idle instances, the memory
// they hold, and the instances it closed.
func (p *pool) stats(st *Stats) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st.Idle = len(p.idle)
	for _, inst := range p.idle {
		st.IdleMemoryBytes += uint64(inst.memBytes)
		st.MaxIdleMemoryBytes = max(st.MaxIdleMemoryBytes, uint64(inst.memBytes))
	}
	st.ClosedFailed, st.ClosedMemory, st.ClosedIdle = p.counts.failed, p.counts.memory, p.counts.idle
	st.RecycleMemoryBytes = p.recycleBytes
}

// close closes the idle instances; instances in use close when put back.
func (p *pool) close() {
	p.mu.Lock()
	p.closed = true
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, inst := range idle {
		inst.close()
	}
}
