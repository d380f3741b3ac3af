package sandbox

import (
	"fmt"
	"sync/atomic"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
)

// memoryAllocator makes the linear memories of a module's instances with
// room for hint bytes from the start (wazero's experimental hook, given
// to InstantiateModule through its context).
//
// A Go guest's memory grows by a few pages at a time as its heap creeps,
// and wazero grows a memory by copying it whole (3–4 MiB for a Go guest)
// into a slice a little larger: several copies in each instance's life,
// paid inside calls, and garbage for the collector. The pool closes an
// instance once its memory reached RecycleGrowth times its size when made
// (pool.put), so room for that much and for the one growth that crosses
// it is all an instance needs for its whole life: one allocation, the same
// peak as before. (A Go guest grows by 512 KiB at a time: without room for
// that step, the growth that got an instance recycled copied its whole
// memory first, a few ms of every ~10,000 no-op calls' CPU, issue 32.)
// hint is zero until
// an instance of the module has been seen to grow after its _initialize
// (a guest whose memory stays as it is made, as a Rust guest's does, keeps
// no room it never uses) and when the pool does not recycle for growth.
//
// It also holds the module's memory limit. The runtime's own limit is the
// most a 32-bit memory has (runtimeFor), so that a memory.grow past the
// module's limit reaches Reallocate, which refuses it (the guest's
// memory.grow returns -1, as it would from wazero) and notes the size
// asked for in refused: the host then knows why a guest that aborts next
// aborted (Module.outcome: MemoryExceeded, whatever the guest printed).
type memoryAllocator struct {
	hint, limit uint64
	refused     *atomic.Uint64
	step        *atomic.Uint64 // the module's largest growth seen (nil: not kept)
	// spare is the module's spare memory (nil: none kept), and made, when
	// set, is told the memory made (the instance's, for keepSpare).
	spare *atomic.Pointer[spareMemory]
	made  **linearMemory
}

// Allocate implements experimental.MemoryAllocator.
func (a memoryAllocator) Allocate(capBytes, maxBytes uint64) experimental.LinearMemory {
	limit := maxBytes
	if a.limit > 0 { // 0: wazero's maximum alone
		limit = min(limit, a.limit)
	}
	want := min(max(capBytes, a.hint), limit)
	var buf []byte
	if a.spare != nil {
		if sp := a.spare.Swap(nil); sp != nil && uint64(cap(sp.buf)) >= want && uint64(cap(sp.buf)) <= limit {
			clear(sp.buf) // what its last instance used; the rest was never written
			buf = sp.buf[:0]
		}
	}
	if buf == nil {
		buf = make([]byte, 0, want)
	}
	lm := &linearMemory{buf: buf, max: limit, refused: a.refused, step: a.step}
	if a.made != nil {
		*a.made = lm
	}
	return lm
}

// spareMemory is the linear memory of an instance the pool replaced for
// its growth, kept for the module's next instance (Module.spare).
//
// A busy Go guest's instance is replaced every few thousand calls
// (RecycleGrowth), and a new memory of ~5 MiB cost its zeroing and a page
// fault for each of its pages, the data segments' copy into it too: about
// half of an instance's making, a large part of what a no-op call costs
// the engine beyond wazero's own call (issue 32). The spare's pages are
// the process's already; it is zeroed up to what its instance used (past
// that, nothing wrote to it). buf's length is that use. Kept for the next
// instance only: the janitor drops one that waited a whole round
// (dropSpare), so an idle module holds none.
type spareMemory struct {
	buf  []byte
	seen atomic.Bool // the janitor has seen it once
}

// keepSpare keeps inst's linear memory as the module's spare. Only for an
// instance no call runs on, closed next, on the loop guard: under
// close-on-done wazero may close an instance from its own goroutine.
func (m *Module) keepSpare(inst *instance) {
	if inst.mem == nil || inst.tier.rt.key.closeOnDone || m.closed.Load() {
		return
	}
	buf := inst.mem.buf
	inst.mem.buf = nil // the instance is closed next: nothing reads it
	inst.mem = nil
	if buf != nil {
		m.spare.Store(&spareMemory{buf: buf})
	}
}

// dropSpare drops the module's spare memory if the janitor saw it at its
// last round too (or at once, when now), and reports whether it did.
func (m *Module) dropSpare(now bool) bool {
	sp := m.spare.Load()
	if sp == nil || (!now && !sp.seen.Swap(true)) {
		return false
	}
	return m.spare.CompareAndSwap(sp, nil)
}

// linearMemory is one instance's memory: grown in place while its capacity
// lasts, else copied into a slice a quarter larger (as append would).
type linearMemory struct {
	buf     []byte
	max     uint64
	refused *atomic.Uint64
	step    *atomic.Uint64
}

// Reallocate implements experimental.LinearMemory. Memory only grows, and
// the bytes past its length were never written: in place, they are zero.
// The first call makes the memory's minimum, which Load checked against
// the limit (checkMemories): it is never refused, as wazero cannot take a
// refusal there.
func (l *linearMemory) Reallocate(size uint64) []byte {
	if l.step != nil && len(l.buf) > 0 && size > uint64(len(l.buf)) {
		// A growth (not the first call, which makes the minimum): a few
		// times in an instance's life.
		if grow := size - uint64(len(l.buf)); grow > l.step.Load() {
			l.step.Store(grow) // a lost race keeps a smaller step: a copy, never a fault
		}
	}
	if size <= uint64(cap(l.buf)) {
		l.buf = l.buf[:size]
		return l.buf
	}
	if size > l.max && l.buf != nil {
		if l.refused != nil {
			l.refused.Store(size)
		}
		return nil
	}
	nb := make([]byte, size, min(max(size, uint64(cap(l.buf))*5/4), l.max))
	copy(nb, l.buf)
	l.buf = nb
	return nb
}

// Free implements experimental.LinearMemory.
func (l *linearMemory) Free() { l.buf = nil }

// memoryHint is the room to make for a new instance's memory: what the
// pool lets an instance grow to before it replaces it, from the size of
// the module's last fresh instance, in whole pages, and the largest growth
// seen, for the one that crosses it. Before an instance was seen to grow
// after its _initialize, or when the pool does not recycle for growth, it
// is the fresh size alone: a Go guest's _initialize grows its memory past
// its minimum (2.75 to 3.3 MiB for the samples), and a memory made at the
// minimum was copied whole on the way, on fresh pages in a new host
// (freshBytes comes from the module's record there, knownModules).
func (m *Module) memoryHint() uint64 {
	fresh, growth := m.freshBytes.Load(), m.pool.recycleGrowth
	if fresh == 0 {
		return 0
	}
	if growth <= 0 || !m.grows.Load() {
		return fresh
	}
	return (uint64(float64(fresh)*growth)+wasmPageSize-1)/wasmPageSize*wasmPageSize + m.growStep.Load()
}

// sawMemory notes the memory an instance of m holds after a call: once
// one has grown past its size when made, new instances get room to grow
// (memoryHint), and the module's count of its instances' memory follows
// the instance. Each is written only when it changes: no shared line is
// written by a call that did not grow its memory.
func (m *Module) sawMemory(inst *instance, mem uint32) {
	if mem > inst.newBytes && !m.grows.Load() {
		m.grows.Store(true)
	}
	if mem != inst.counted {
		m.instanceBytes.Add(int64(mem) - int64(inst.counted))
		inst.counted = mem
	}
}

// checkMemories refuses a module whose memory declares a minimum or a
// maximum past the module's limit of limit pages: the allocator, which
// holds the limit, cannot refuse a memory's minimum, and a declared
// maximum past the limit would promise the guest what it cannot have.
func checkMemories(cm wazero.CompiledModule, limit uint32) error {
	var defs []api.MemoryDefinition
	for _, d := range cm.ExportedMemories() {
		defs = append(defs, d)
	}
	defs = append(defs, cm.ImportedMemories()...)
	for _, d := range defs {
		if d.Min() > limit {
			return fmt.Errorf("its memory's minimum of %d pages is over the memory limit of %d pages", d.Min(), limit)
		}
		if mx, ok := d.Max(); ok && mx > limit {
			return fmt.Errorf("its memory's maximum of %d pages is over the memory limit of %d pages", mx, limit)
		}
	}
	return nil
}
