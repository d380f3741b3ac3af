package sandbox

import (
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
// (pool.put), so room for that much is all an instance needs for its
// whole life: one allocation, the same peak as before. hint is zero until
// an instance of the module has been seen to grow after its _initialize
// (a guest whose memory stays as it is made, as a Rust guest's does, keeps
// no room it never uses) and when the pool does not recycle for growth.
type memoryAllocator struct{ hint uint64 }

// Allocate implements experimental.MemoryAllocator.
func (a memoryAllocator) Allocate(capBytes, maxBytes uint64) experimental.LinearMemory {
	return &linearMemory{buf: make([]byte, 0, min(max(capBytes, a.hint), maxBytes)), max: maxBytes}
}

// linearMemory is one instance's memory: grown in place while its capacity
// lasts, else copied into a slice a quarter larger (as append would).
type linearMemory struct {
	buf []byte
	max uint64
}

// Reallocate implements experimental.LinearMemory. Memory only grows, and
// the bytes past its length were never written: in place, they are zero.
func (l *linearMemory) Reallocate(size uint64) []byte {
	if size <= uint64(cap(l.buf)) {
		l.buf = l.buf[:size]
		return l.buf
	}
	if size > l.max {
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
// the module's last fresh instance, in whole pages.
func (m *Module) memoryHint() uint64 {
	fresh, growth := m.freshBytes.Load(), m.pool.recycleGrowth
	if fresh == 0 || growth <= 0 || !m.grows.Load() {
		return 0
	}
	return (uint64(float64(fresh)*growth) + wasmPageSize - 1) / wasmPageSize * wasmPageSize
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
