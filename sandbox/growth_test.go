package sandbox

import (
	"context"
	"testing"
	"time"
)

// TestInstanceGrownOverItsFreshSizeIsReplaced: an instance whose linear
// memory grew in a successful call to Config.RecycleGrowth times what it
// had when it was made is closed as it returns to the pool (the call
// itself succeeds), and the next call gets a fresh instance; one that grew
// less, or did not grow, is kept; and with the growth check off, only the
// memory limit's fraction recycles.
func TestInstanceGrownOverItsFreshSizeIsReplaced(t *testing.T) {
	for _, c := range []struct {
		name     string
		growth   float64
		mib      int // the call's growth, in MiB over the instance's fresh size (-1: echo)
		recycled bool
	}{
		{"default 1.5, grew by twice its fresh size", 0, 2, true},
		{"default 1.5, did not grow", 0, -1, false},
		{"2, grew by twice its fresh size", 2, 2, true},
		{"4, grew by 1 MiB", 4, 1, false},
		{"off, grew by twice its fresh size", -1, 2, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newSandbox(t, Config{MaxInstances: 1, RecycleGrowth: c.growth})
			m := load(t, s, "samples/misbehaving", ModuleConfig{})
			fresh := m.Stats().MaxIdleMemoryBytes // the probe instance, made at load and not yet called
			if fresh == 0 {
				t.Fatal("no idle instance after load")
			}
			ev := echoEvent("small")
			if c.mib >= 0 {
				mib := c.mib
				if c.mib == 2 {
					mib = 2 * int((fresh+1<<20-1)>>20) // twice the fresh size, rounded up to MiB
				}
				ev = grow(mib)
			}
			if o := m.Invoke(context.Background(), ev, 10*time.Second); o.Kind != Success {
				t.Fatalf("%v %s", o.Kind, o.Error())
			}
			st := m.Stats()
			want := c.growth
			switch {
			case want == 0:
				want = DefaultRecycleGrowth
			case want <= 1:
				want = 0
			}
			if st.RecycleGrowth != want {
				t.Errorf("Stats().RecycleGrowth = %v, want %v", st.RecycleGrowth, want)
			}
			if c.recycled {
				if st.ClosedMemory != 1 || st.Idle != 0 || st.Live != 0 {
					t.Fatalf("closed for memory %d, idle %d, live %d; want the grown instance closed (1, 0, 0)", st.ClosedMemory, st.Idle, st.Live)
				}
				// The next call gets a new instance, at its fresh size again.
				if o := m.Invoke(context.Background(), echoEvent("after"), 10*time.Second); o.Kind != Success {
					t.Fatalf("%v %s", o.Kind, o.Error())
				}
				st = m.Stats()
				if st.Created != 2 || st.Idle != 1 || st.MaxIdleMemoryBytes >= uint64(want*float64(fresh)) {
					t.Errorf("created %d, idle %d holding %d bytes; want a second instance pooled under %v × %d bytes",
						st.Created, st.Idle, st.MaxIdleMemoryBytes, want, fresh)
				}
				return
			}
			if st.ClosedMemory != 0 || st.Idle != 1 || st.Created != 1 {
				t.Errorf("closed for memory %d, idle %d, created %d; want the one instance kept (0, 1, 1)", st.ClosedMemory, st.Idle, st.Created)
			}
			if c.mib > 0 && st.MaxIdleMemoryBytes <= fresh {
				t.Errorf("the kept instance holds %d bytes, no more than its fresh %d: the call did not grow it", st.MaxIdleMemoryBytes, fresh)
			}
		})
	}
}
