package sandbox

import (
	"context"
	"fmt"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/affinity"
)

// keyed returns a context of affinity key k.
func keyed(k int) context.Context { return affinity.With(context.Background(), k) }

// take acquires an instance of m's pool under ctx or fails the test.
func take(t *testing.T, m *Module, ctx context.Context) *instance {
	t.Helper()
	inst, err := m.pool.acquire(ctx, time.Now().Add(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return inst
}

// TestAffinityKeepsAnInstancePerKey: calls of two keys at once each get an
// instance, which waits in its key's slot and is the one the key's next
// call takes; a call of another key, or of none, takes a waiting instance
// rather than make one; every waiting instance counts as idle.
func TestAffinityKeepsAnInstancePerKey(t *testing.T) {
	m := load(t, newSandbox(t, Config{MaxInstances: 4}), "samples/misbehaving", ModuleConfig{})
	a, b := take(t, m, keyed(0)), take(t, m, keyed(1))
	m.pool.put(a, false)
	m.pool.put(b, false)
	if st := m.Stats(); st.Created != 2 || st.Idle != 2 || st.IdleMemoryBytes == 0 {
		t.Fatalf("after a call of each key: %+v, want 2 made, 2 idle with their memory", st)
	}
	for range 3 {
		if got := take(t, m, keyed(1)); got != b {
			t.Fatal("key 1 got another instance than the one its last call used")
		} else {
			m.pool.put(got, false)
		}
		if got := take(t, m, keyed(4)); got != a { // 4 % 4: key 0's slot
			t.Fatal("key 4 got another instance than key 0's, whose slot it shares")
		} else {
			m.pool.put(got, false)
		}
	}
	c := take(t, m, keyed(2)) // an empty slot: takes one waiting in another
	d := take(t, m, context.Background())
	if (c != a && c != b) || (d != a && d != b) || c == d {
		t.Fatal("calls of an empty slot and of no key did not take the two waiting instances")
	}
	m.pool.put(c, false)
	m.pool.put(d, false)
	if st := m.Stats(); st.Created != 2 || st.Idle != 2 || st.Live != 2 {
		t.Fatalf("after calls of other keys: %+v, want the same 2 instances, idle", st)
	}
}

// TestAffinityAtTheCap: with a pool of one, an instance waiting in a key's
// slot is taken by another key's call at once, and a call waiting for the
// pool's one instance gets it when it is put back under its key, instead
// of it staying in that key's slot.
func TestAffinityAtTheCap(t *testing.T) {
	m := load(t, newSandbox(t, Config{MaxInstances: 1}), "samples/misbehaving", ModuleConfig{})
	inst := take(t, m, keyed(0))
	m.pool.put(inst, false)
	other := take(t, m, keyed(1)) // at the cap: takes key 0's
	if other != inst {
		t.Fatal("a call at the cap made or waited for an instance while one waited in a slot")
	}
	got := make(chan *instance)
	go func() {
		i, err := m.pool.acquire(keyed(2), time.Now().Add(10*time.Second))
		if err != nil {
			t.Error(err)
		}
		got <- i
	}()
	checkfor.Eventually(t, func() error { // the call waits for the one instance
		if m.pool.waiting.Load() == 0 {
			return fmt.Errorf("no call waits for an instance")
		}
		return nil
	})
	m.pool.put(other, false) // under key 1, whose slot is empty
	select {
	case i := <-got:
		if i != inst {
			t.Fatal("the waiting call got another instance")
		}
		m.pool.put(i, false)
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting call did not get the instance put back into a slot within 10s")
	}
	if st := m.Stats(); st.Created != 1 || st.Idle != 1 {
		t.Fatalf("%+v, want the one instance, idle", st)
	}
}

// TestAffinityIdleReleaseAndClose: the idle release closes instances
// waiting in slots and gives their pool slots back (a pool of one makes a
// new instance after), and Close closes the one in a slot.
func TestAffinityIdleReleaseAndClose(t *testing.T) {
	m := load(t, newSandbox(t, Config{MaxInstances: 1}), "samples/misbehaving", ModuleConfig{})
	m.pool.put(take(t, m, keyed(0)), false)
	m.pool.releaseIdle(time.Now().Add(time.Hour))
	if st := m.Stats(); st.Live != 0 || st.Idle != 0 || st.ClosedIdle != 1 {
		t.Fatalf("after the idle release: %+v, want the slot's instance closed", st)
	}
	m.pool.put(take(t, m, keyed(3)), false) // the pool slot came back: a new instance
	m.pool.releaseIdle(time.Now().Add(-time.Hour))
	if st := m.Stats(); st.Live != 1 || st.Idle != 1 {
		t.Fatalf("after a release with nothing idle long: %+v, want the instance kept", st)
	}
	if got := take(t, m, keyed(3)); got == nil {
		t.Fatal("no instance")
	} else {
		m.pool.put(got, false)
	}
	m.Close(context.Background())
	if st := m.Stats(); st.Live != 0 {
		t.Fatalf("after Close: %+v, want no instance", st)
	}
}

// TestAffinityTierUp: an interpreter instance waiting in a slot when the
// module's compiled code is ready is closed by the switch; its key's next
// call gets a compiled instance.
func TestAffinityTierUp(t *testing.T) {
	gate := make(chan struct{})
	m := load(t, openSandbox(t, Config{CacheDir: t.TempDir(), Tiering: TierUp, tierUpGate: gate}), "samples/bench", ModuleConfig{})
	if o := m.Invoke(keyed(0), orderPlaced(), 10*time.Second); o.Kind != Success {
		t.Fatalf("%v: %s", o.Kind, o.Error())
	}
	close(gate)
	<-m.tierDone
	// The first call took the instance made at load, which waited in the slot.
	if st := m.Stats(); st.ClosedTierUp != 1 || st.Live != 0 {
		t.Fatalf("after the switch: %+v, want the slot's interpreter instance closed", st)
	}
	inst := take(t, m, keyed(0))
	if inst.tier.name != TierCompiled {
		t.Fatalf("key 0's call after the switch runs on %s", inst.tier.name)
	}
	m.pool.put(inst, false)
	if st := m.Stats(); st.ClosedTierUp != 1 || st.Created != 2 || st.Live != 1 || st.Idle != 1 {
		t.Fatalf("%+v, want a compiled instance idle", st)
	}
}

// TestAffinityUnderLoad runs calls of four keys and of none at once on a
// pool of two, many times: every call succeeds, no call waits forever, and
// the pool never holds more than two instances.
func TestAffinityUnderLoad(t *testing.T) {
	m := load(t, newSandbox(t, Config{MaxInstances: 2}), "samples/misbehaving", ModuleConfig{})
	var wg sync.WaitGroup
	for g := range 5 {
		ctx := context.Background()
		if g < 4 {
			ctx = keyed(g)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 300 {
				if o := m.Invoke(ctx, echoEvent("k"), 10*time.Second); o.Kind != Success {
					t.Errorf("%v: %s", o.Kind, o.Error())
					return
				}
			}
		}()
	}
	wg.Wait()
	if st := m.Stats(); st.Created > 2+st.ClosedMemory || st.Live > 2 {
		t.Fatalf("%+v, want at most two instances at a time", st)
	}
}
