package sandbox

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/berthhq/berth/internal/affinity"
)

// slot is where an instance waits between the calls of one affinity key
// (internal/affinity: the engine gives each partition its own), alone on its
// cache line: the next call of that key takes it back with one atomic swap,
// and two cores calling one module under different keys write nothing the
// other reads. An instance in a slot is idle, but keeps the pool slot (busy)
// its call held, so taking it back needs no lock.
//
// Slots hold nothing a call needs: a call with no key, or whose slot is
// empty, takes an instance out of another key's slot before it makes one or
// waits at the cap, and an instance is not left in a slot while a call waits
// for a pool slot.
type slot struct {
	inst atomic.Pointer[instance]
	_    [cacheLine - 8]byte
}

// cacheLine is what a slot's padding rounds to: two 64-byte lines, as cores
// fetch lines in adjacent pairs.
const cacheLine = 128

// slotOf returns the index of ctx's affinity slot; -1 when ctx has no key.
func (p *pool) slotOf(ctx context.Context) int {
	if len(p.slots) == 0 {
		return -1
	}
	if k := affinity.Of(ctx); k >= 0 {
		return k % len(p.slots)
	}
	return -1
}

// fromSlot takes the instance waiting in slot i, with the pool slot it
// holds; ok is false when the slot is empty.
func (p *pool) fromSlot(ctx context.Context, deadline time.Time, i int) (inst *instance, ok bool, err error) {
	s := &p.slots[i]
	if s.inst.Load() == nil {
		return nil, false, nil
	}
	if inst = s.inst.Swap(nil); inst == nil {
		return nil, false, nil
	}
	if p.closedFlag.Load() {
		// Left there by a put racing Close (toSlot): the pool takes no
		// more calls.
		inst.close()
		return nil, true, ErrClosed
	}
	inst, err = p.holding(ctx, deadline, inst)
	return inst, true, err
}

// steal takes an instance out of any slot, with the pool slot it holds;
// nil when every slot is empty.
func (p *pool) steal() *instance {
	for i := range p.slots {
		s := &p.slots[i]
		if inst := s.inst.Load(); inst != nil && s.inst.CompareAndSwap(inst, nil) {
			return inst
		}
	}
	return nil
}

// holding returns inst, taken from a slot with the pool slot it holds, for
// a call; one made on a tier the module has left is closed and a new one
// made in its place.
func (p *pool) holding(ctx context.Context, deadline time.Time, inst *instance) (*instance, error) {
	if !p.stale(inst) {
		return inst, nil
	}
	p.mu.Lock()
	p.counts.tierUp++
	p.mu.Unlock()
	inst.close()
	inst, err := p.create(ctx, deadline)
	if err != nil {
		p.release()
		return nil, err
	}
	return inst, nil
}

// toSlot leaves inst, kept after its call, in its key's slot with the pool
// slot it holds; false when another instance is there (the caller puts inst
// in the idle list). Since a call waiting at the cap needs a pool slot, an
// instance is moved from its slot to the idle list when one waits: the
// waiter counts itself before it looks at the slots (acquire), and toSlot
// looks at the count after it filled one, so one of the two sees the other.
func (p *pool) toSlot(inst *instance) bool {
	s := &p.slots[inst.slot]
	if !s.inst.CompareAndSwap(nil, inst) {
		return false
	}
	if p.waiting.Load() > 0 || p.closedFlag.Load() {
		if inst := s.inst.Swap(nil); inst != nil {
			p.mu.Lock()
			closed := p.closed
			if !closed {
				p.idle = append(p.idle, inst)
			}
			p.releaseLocked()
			p.mu.Unlock()
			if closed {
				inst.close()
			}
		}
	}
	return true
}
