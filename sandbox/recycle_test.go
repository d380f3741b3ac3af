package sandbox

import (
	"context"
	"encoding/json"
	goruntime "runtime"
	"testing"
	"time"
	"weak"

	"github.com/berthhq/berth/internal/clock"
	"github.com/berthhq/berth/wasm/abi"
)

func hog() *abi.Event { return &abi.Event{Handler: "memoryHog", InvocationKey: "hog"} }

func grow(mib int) *abi.Event {
	payload, _ := json.Marshal(map[string]int{"mib": mib})
	return &abi.Event{Handler: "memoryGrower", InvocationKey: "grow", Payload: payload}
}

func heapAfterGC() uint64 {
	var ms goruntime.MemStats
	goruntime.GC()
	goruntime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestInstanceAtMemoryLimitIsNotKept: a guest that grows its memory until
// memory.grow fails leaves nothing of its instance behind — not in the
// pool, and not in the Go heap: after eight such calls, each on one of
// eight warm pooled instances, the heap holds less than one memory limit
// more than before.
func TestInstanceAtMemoryLimitIsNotKept(t *testing.T) {
	const pages = 256 // 16 MiB
	s := newSandbox(t, Config{MaxInstances: 8})
	m := load(t, s, "samples/misbehaving", ModuleConfig{MemoryLimitPages: pages})
	ctx := context.Background()
	// Fill the pool: eight instances, all idle.
	var warm []*instance
	for range 8 {
		inst, err := m.pool.acquire(ctx, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		warm = append(warm, inst)
	}
	for _, inst := range warm {
		m.pool.put(inst, false)
	}
	warm = nil
	if st := m.Stats(); st.Idle != 8 {
		t.Fatalf("idle instances = %d, want 8", st.Idle)
	}
	before := heapAfterGC()
	for i := range 8 {
		if o := m.Invoke(ctx, hog(), 10*time.Second); o.Kind != MemoryExceeded {
			t.Fatalf("hog %d: %v %s", i, o.Kind, o.Error())
		}
	}
	st := m.Stats()
	if st.Live != 0 || st.Idle != 0 || st.IdleMemoryBytes != 0 || st.ClosedFailed != 8 {
		t.Errorf("after 8 hogs: live %d, idle %d holding %d bytes, closed after failure %d; want 0, 0, 0, 8",
			st.Live, st.Idle, st.IdleMemoryBytes, st.ClosedFailed)
	}
	m.pool.mu.Lock()
	for i, inst := range m.pool.idle[:cap(m.pool.idle)] {
		if inst != nil {
			t.Errorf("the pool's idle array still points at an instance in slot %d", i)
		}
	}
	m.pool.mu.Unlock()
	limit := uint64(pages) * wasmPageSize
	if after := heapAfterGC(); after > before+limit {
		t.Errorf("Go heap after GC grew from %d to %d MiB over 8 hogs: more than one %d MiB memory limit is kept",
			before>>20, after>>20, limit>>20)
	}
}

// TestGrownInstanceIsRecycled: an instance whose memory grew to the
// recycle fraction of its limit in a successful call is closed, not
// pooled; a smaller one is pooled (with the growth check off).
func TestGrownInstanceIsRecycled(t *testing.T) {
	for _, c := range []struct {
		name     string
		fraction float64
		mib      int
		recycled bool
	}{
		{"default half, grew 40 of 64 MiB", 0, 40, true},
		{"default half, grew 2 of 64 MiB", 0, 2, false},
		{"0.9, grew 40 of 64 MiB", 0.9, 40, false},
		{"0.25, grew 20 of 64 MiB", 0.25, 20, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			// The growth check is off: the cases below grow far past their
			// fresh size, and this test is of the fraction of the limit alone
			// (TestInstanceGrownOverItsFreshSizeIsReplaced is of the growth).
			s := newSandbox(t, Config{RecycleMemoryFraction: c.fraction, RecycleGrowth: -1})
			m := load(t, s, "samples/misbehaving", ModuleConfig{})
			if o := m.Invoke(context.Background(), grow(c.mib), 10*time.Second); o.Kind != Success {
				t.Fatalf("%v %s", o.Kind, o.Error())
			}
			st := m.Stats()
			want := c.fraction
			if want == 0 {
				want = DefaultRecycleMemoryFraction
			}
			if st.RecycleMemoryBytes != uint64(want*float64(st.MemoryLimitBytes)) {
				t.Errorf("recycle at %d bytes, want %v of %d", st.RecycleMemoryBytes, want, st.MemoryLimitBytes)
			}
			if st.MaxIdleMemoryBytes >= st.RecycleMemoryBytes {
				t.Errorf("an idle instance holds %d bytes, at or above the recycle size %d", st.MaxIdleMemoryBytes, st.RecycleMemoryBytes)
			}
			if c.recycled {
				if st.ClosedMemory != 1 || st.Idle != 0 || st.Live != 0 {
					t.Errorf("closed for memory %d, idle %d, live %d; want the grown instance closed (1, 0, 0)", st.ClosedMemory, st.Idle, st.Live)
				}
				return
			}
			if st.ClosedMemory != 0 || st.Idle != 1 || st.MaxIdleMemoryBytes < uint64(c.mib)<<20 {
				t.Errorf("closed for memory %d, idle %d holding at most %d bytes; want the instance pooled with its %d MiB",
					st.ClosedMemory, st.Idle, st.MaxIdleMemoryBytes, c.mib)
			}
		})
	}
}

// TestIdleInstancesReleasedByTheClock drives the idle release with the
// sandbox's clock: each instance is closed once it has been idle for
// longer than IdleTimeout since its own last call, and not before.
func TestIdleInstancesReleasedByTheClock(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := newSandbox(t, Config{IdleTimeout: time.Minute, Clock: clk})
	m := load(t, s, "samples/misbehaving", ModuleConfig{})
	ctx := context.Background()
	// Two instances: a, last used at 0s, and b, last used at 30s.
	a, err := m.pool.acquire(ctx, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.pool.acquire(ctx, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	m.pool.put(a, false)
	clk.Advance(30 * time.Second)
	m.pool.put(b, false)

	for _, step := range []struct {
		advance    time.Duration
		idle       int
		closedIdle int64
	}{
		{0, 2, 0},                // at 30s
		{30 * time.Second, 2, 0}, // at 60s: a idle exactly 1m, not longer
		{time.Second, 1, 1},      // at 61s: a goes
		{29 * time.Second, 1, 1}, // at 90s: b idle exactly 1m
		{time.Second, 0, 2},      // at 91s: b goes
		{time.Hour, 0, 2},        // nothing left to release
	} {
		clk.Advance(step.advance)
		s.releaseIdle()
		st := m.Stats()
		if st.Idle != step.idle || st.ClosedIdle != step.closedIdle || st.Live != int64(step.idle) {
			t.Fatalf("at +%v: idle %d, live %d, closed idle %d; want %d, %d, %d",
				clk.Now().Sub(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), st.Idle, st.Live, st.ClosedIdle, step.idle, step.idle, step.closedIdle)
		}
	}
	// A call after the release gets a fresh instance, which the clock ages
	// from its own call.
	if o := m.Invoke(ctx, echoEvent("late"), time.Second); o.Kind != Success {
		t.Fatal(o.Error())
	}
	clk.Advance(time.Minute)
	s.releaseIdle()
	if st := m.Stats(); st.Idle != 1 {
		t.Fatalf("idle %d after exactly one minute, want 1", st.Idle)
	}
	clk.Advance(time.Nanosecond)
	s.releaseIdle()
	if st := m.Stats(); st.Idle != 0 || st.Live != 0 {
		t.Fatalf("idle %d, live %d after a minute and a nanosecond, want 0, 0", st.Idle, st.Live)
	}
}

// TestClosedInstanceIsNotHeldByItsTimer: a closed instance is garbage at
// the next collection, though its deadline timer (made for _initialize,
// InitTimeout ahead) is only stopped and stays in the runtime's timer heap
// until the runtime cleans it: the timer fires at a timerAim the close
// empties, not at the instance. Held there, a closed instance kept its
// wazero module and, on the interpreter, the module's form alive (six
// uploads: one or two let-go forms of ~72 MB in a third of the runs).
func TestClosedInstanceIsNotHeldByItsTimer(t *testing.T) {
	for _, mode := range deadlineGuards {
		t.Run(mode.name, func(t *testing.T) {
			s := newSandbox(t, Config{Deadlines: mode.mode})
			m := load(t, s, "samples/misbehaving", ModuleConfig{})
			// Timers due before the instance's keep a stopped one off the
			// heap's head, where the runtime would drop it at once, as in
			// a host (its stores' and subscriptions' timers).
			for range 256 {
				before := time.AfterFunc(m.cfg.InitTimeout/2, func() {})
				t.Cleanup(func() { before.Stop() })
			}
			inst, err := m.newInstance(context.Background(), time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			if inst.timer == nil {
				t.Fatal("_initialize ran with no deadline timer: nothing to test")
			}
			gone := weak.Make(inst)
			inst.close()
			inst = nil
			for range 5 {
				goruntime.GC()
				if gone.Value() == nil {
					return
				}
			}
			t.Fatal("the closed instance is still reachable after five collections")
		})
	}
}
