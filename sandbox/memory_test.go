package sandbox

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
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

// TestMemoryHint: room to grow is made only for a module whose instances
// were seen to grow after their _initialize, up to what the pool lets one
// grow to before it replaces it.
func TestMemoryHint(t *testing.T) {
	m := load(t, newSandbox(t, Config{MaxInstances: 1}), "samples/bench", ModuleConfig{})
	if h := m.memoryHint(); h != 0 {
		t.Errorf("hint %d before any instance grew, want 0", h)
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
