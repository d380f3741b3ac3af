package sandbox

import (
	"bytes"
	"context"
	"fmt"
	goruntime "runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/checkfor"
)

// TestLinearMemory: a memory grows in place within the room it was made
// with (its bytes kept, the new ones zero), by copying past it, and never
// past its maximum.
func TestLinearMemory(t *testing.T) {
	lm := memoryAllocator{hint: 4 * wasmPageSize}.Allocate(wasmPageSize, 8*wasmPageSize).(*linearMemory)
	b := lm.Reallocate(wasmPageSize)
	copy(b, "abc")
	grown := lm.Reallocate(3 * wasmPageSize)
	if &grown[0] != &b[0] {
		t.Error("grown within its room, the memory moved")
	}
	if !bytes.HasPrefix(grown, []byte("abc")) || bytes.ContainsFunc(grown[3:], func(r rune) bool { return r != 0 }) {
		t.Error("grown in place, the memory lost its bytes or is not zero past them")
	}
	copied := lm.Reallocate(6 * wasmPageSize)
	if len(copied) != 6*wasmPageSize || !bytes.HasPrefix(copied, []byte("abc")) || bytes.ContainsFunc(copied[3:], func(r rune) bool { return r != 0 }) {
		t.Error("grown past its room, the memory lost its bytes or is not zero past them")
	}
	if lm.Reallocate(9*wasmPageSize) != nil {
		t.Error("the memory grew past its maximum")
	}
}

// TestMemoryHint: before its instances were seen to grow after their
// _initialize, a module's new memories are made at the size _initialize
// left the last one; room to grow past it is made only for a module whose
// instances were seen to grow, up to what the pool lets one grow to before
// it replaces it.
func TestMemoryHint(t *testing.T) {
	m := load(t, newSandbox(t, Config{MaxInstances: 1}), "samples/bench", ModuleConfig{})
	if h, fresh := m.memoryHint(), m.freshBytes.Load(); h != fresh || fresh == 0 {
		t.Errorf("hint %d before any instance grew, want the fresh size, %d", h, fresh)
	}
	inst, err := m.pool.acquire(t.Context(), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	m.sawMemory(inst, inst.newBytes+wasmPageSize)
	fresh := uint64(inst.newBytes)
	m.pool.put(inst, false)
	if h := m.memoryHint(); h < uint64(float64(fresh)*m.pool.recycleGrowth) || h%wasmPageSize != 0 {
		t.Errorf("hint %d once an instance grew from %d bytes, want whole pages for %.2f times that", h, fresh, m.pool.recycleGrowth)
	}
}

// TestMemoryHintLeavesRoomForTheLastGrowth: the largest growth a memory
// made is remembered, not its first making, and the hint leaves room for
// one more such step past the recycling size, so that the growth that gets
// an instance replaced does not copy its whole memory first.
func TestMemoryHintLeavesRoomForTheLastGrowth(t *testing.T) {
	var step atomic.Uint64
	lm := memoryAllocator{step: &step}.Allocate(wasmPageSize, 64*wasmPageSize).(*linearMemory)
	lm.Reallocate(10 * wasmPageSize) // its minimum: not a growth
	if got := step.Load(); got != 0 {
		t.Fatalf("step %d after the memory was made, want 0", got)
	}
	lm.Reallocate(12 * wasmPageSize)
	lm.Reallocate(20 * wasmPageSize)
	lm.Reallocate(21 * wasmPageSize)
	if got := step.Load(); got != 8*wasmPageSize {
		t.Errorf("step %d, want the largest growth, %d", got, 8*wasmPageSize)
	}

	m := load(t, newSandbox(t, Config{MaxInstances: 1}), "samples/bench", ModuleConfig{})
	inst, err := m.pool.acquire(t.Context(), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	m.sawMemory(inst, inst.newBytes+wasmPageSize)
	m.pool.put(inst, false)
	m.growStep.Store(0) // its _initialize grew it too
	before := m.memoryHint()
	m.growStep.Store(8 * wasmPageSize)
	if got := m.memoryHint(); got != before+8*wasmPageSize {
		t.Errorf("hint %d with a step of 8 pages, want %d", got, before+8*wasmPageSize)
	}
}

// TestSpareMemoryServesTheNextInstance: the memory of an instance replaced
// for its growth is the next memory made, zeroed; one too small is not
// used; the janitor drops a spare it has seen at two rounds, not at one.
func TestSpareMemoryServesTheNextInstance(t *testing.T) {
	var spare atomic.Pointer[spareMemory]
	used := make([]byte, 6*wasmPageSize, 8*wasmPageSize)
	for i := range used {
		used[i] = 0xAB
	}
	spare.Store(&spareMemory{buf: used})
	var made *linearMemory
	lm := memoryAllocator{hint: 7 * wasmPageSize, spare: &spare, made: &made}.Allocate(wasmPageSize, 64*wasmPageSize).(*linearMemory)
	if made != lm {
		t.Error("the allocator did not tell which memory it made")
	}
	if spare.Load() != nil {
		t.Error("the spare was not taken")
	}
	b := lm.Reallocate(8 * wasmPageSize)
	if &b[0] != &used[0] {
		t.Fatal("the new memory is not the spare's")
	}
	if bytes.ContainsFunc(b, func(r rune) bool { return r != 0 }) {
		t.Error("the spare was not zeroed")
	}

	small := &spareMemory{buf: make([]byte, wasmPageSize, 2*wasmPageSize)}
	spare.Store(small)
	lm = memoryAllocator{hint: 7 * wasmPageSize, spare: &spare}.Allocate(wasmPageSize, 64*wasmPageSize).(*linearMemory)
	if cap(lm.buf) < 7*wasmPageSize {
		t.Errorf("a memory of %d bytes' room, want the hint's %d", cap(lm.buf), 7*wasmPageSize)
	}

	m := &Module{}
	m.spare.Store(&spareMemory{buf: make([]byte, 1)})
	if m.dropSpare(false) || m.spare.Load() == nil {
		t.Error("a spare was dropped at the first round that saw it")
	}
	if !m.dropSpare(false) || m.spare.Load() != nil {
		t.Error("a spare seen at two rounds was kept")
	}
}

// TestLoadChecksDeclaredMemoryAgainstTheLimit: the memory limit is the
// allocator's, so a memory whose declared minimum or maximum is past it is
// refused when the module starts, as wazero refused it when the limit was
// its own.
func TestLoadChecksDeclaredMemoryAgainstTheLimit(t *testing.T) {
	s := newSandbox(t, Config{})
	rt, err := s.runtimeFor(context.Background(), runtimeKey{memoryPages: 16})
	if err != nil {
		t.Fatal(err)
	}
	// (module (memory (export "memory") MIN [MAX]))
	module := func(limits ...byte) []byte {
		mem := append([]byte{1}, limits...) // one memory
		exp := []byte{1, 6, 'm', 'e', 'm', 'o', 'r', 'y', 2, 0}
		b := []byte{0, 'a', 's', 'm', 1, 0, 0, 0, 5, byte(len(mem))}
		b = append(b, mem...)
		return append(append(b, 7, byte(len(exp))), exp...)
	}
	for _, c := range []struct {
		limits []byte
		want   string
	}{
		{[]byte{0, 2}, ""},     // min 2, no max
		{[]byte{1, 2, 16}, ""}, // min 2, max 16
		{[]byte{0, 17}, "minimum of 17 pages is over the memory limit of 16 pages"},
		{[]byte{1, 2, 100}, "maximum of 100 pages is over the memory limit of 16 pages"},
	} {
		cm, err := rt.r.CompileModule(context.Background(), module(c.limits...))
		if err != nil {
			t.Fatalf("% x: %v", c.limits, err)
		}
		err = checkMemories(cm, 16)
		cm.Close(context.Background())
		if (c.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("% x: %v, want %q", c.limits, err, c.want)
		}
	}
}

// TestModuleMemoryStats: what Stats says a module holds. Its instances'
// linear memory counts each live instance, idle or busy, and none once
// closed; its code is the module it compiles; its machine code is what its
// compile mapped (where /proc/self/maps tells it), within the process's,
// and none on the interpreter.
func TestModuleMemoryStats(t *testing.T) {
	// Earlier tests' compiled code is unmapped by finalizers after a
	// collection; a compile during which that happens is not measured.
	settleMappings(t)
	m := load(t, newSandbox(t, Config{}), "samples/bench", ModuleConfig{})
	st := m.Stats()
	if st.Idle != 1 || st.InstanceMemoryBytes == 0 || st.InstanceMemoryBytes != st.IdleMemoryBytes {
		t.Fatalf("after load: %+v, want one idle instance's memory counted", st)
	}
	if st.CodeBytes != uint64(len(m.code)) || st.CodeBytes == 0 {
		t.Errorf("code %d bytes, want the module's %d", st.CodeBytes, len(m.code))
	}
	if _, ok := execSpans(); ok && (st.MachineCodeBytes == 0 || st.MachineCodeBytes > MachineCodeBytes()) {
		t.Errorf("machine code %d bytes, want some, within the process's %d", st.MachineCodeBytes, MachineCodeBytes())
	}
	one := st.InstanceMemoryBytes
	a, err := m.pool.acquire(t.Context(), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.pool.acquire(t.Context(), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.Stats().InstanceMemoryBytes, one+uint64(b.newBytes); got != want {
		t.Errorf("two busy instances: %d bytes counted, want %d", got, want)
	}
	m.sawMemory(a, a.newBytes+wasmPageSize) // as if a's call grew its memory by a page
	if got, want := m.Stats().InstanceMemoryBytes, one+uint64(b.newBytes)+wasmPageSize; got != want {
		t.Errorf("one grown by a page: %d bytes counted, want %d", got, want)
	}
	m.pool.put(a, false) // its memory read again: as it was made
	m.pool.put(b, true)  // b's call failed: closed
	if got := m.Stats().InstanceMemoryBytes; got != one {
		t.Errorf("one instance left: %d bytes counted, want %d", got, one)
	}
	m.Close(t.Context())
	if got := m.Stats().InstanceMemoryBytes; got != 0 {
		t.Errorf("closed: %d bytes of instances counted, want 0", got)
	}

	interp := onTier(t, TierInterpreter, "samples/bench", Config{}, ModuleConfig{})
	if got := interp.Stats().MachineCodeBytes; got != 0 {
		t.Errorf("on the interpreter: %d bytes of machine code, want 0", got)
	}
}

// TestAddedSpans: what a compile mapped is the address ranges no earlier
// mapping covered, whether the kernel joined it to a neighbour, and
// whatever was unmapped meanwhile.
func TestAddedSpans(t *testing.T) {
	before := []span{{10, 20}, {30, 40}}
	for _, c := range []struct {
		after []span
		want  uint64
	}{
		{[]span{{10, 20}, {30, 40}}, 0},
		{[]span{{10, 25}, {30, 35}, {50, 60}}, 15}, // joined to a neighbour, part unmapped, one new
		{[]span{{5, 45}}, 20},                      // joined to both
		{[]span{{50, 60}}, 10},                     // the earlier ones unmapped
		{nil, 0},
	} {
		if got := added(before, c.after); got != c.want {
			t.Errorf("added(%v, %v) = %d, want %d", before, c.after, got, c.want)
		}
	}
}

// settleMappings collects garbage until the process's machine code stays
// as it is: closed modules' code unmapped.
func settleMappings(t *testing.T) {
	last := MachineCodeBytes()
	checkfor.Nil(t, 10*time.Second, 20*time.Millisecond, func() error {
		goruntime.GC()
		now := MachineCodeBytes()
		defer func() { last = now }()
		if now != last {
			return fmt.Errorf("machine code %d bytes, %d a moment ago", now, last)
		}
		return nil
	})
}
