package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/retry"
	"github.com/berthhq/berth/wasm/abi"
)

func echoEvent(key string) *abi.Event {
	return &abi.Event{Handler: "echo", InvocationKey: key}
}

// TestPoolIsCappedAndShrinks runs more concurrent calls than the cap: no
// more than MaxInstances instances ever exist, every call completes, and
// idle instances are released after IdleTimeout.
func TestPoolIsCappedAndShrinks(t *testing.T) {
	s := newSandbox(t, Config{MaxInstances: 2, IdleTimeout: 300 * time.Millisecond})
	m := load(t, s, "samples/misbehaving", ModuleConfig{})
	var wg sync.WaitGroup
	outcomes := make([]Outcome, 6)
	for i := range outcomes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The sleeper holds its instance until the deadline.
			outcomes[i] = m.Invoke(context.Background(), &abi.Event{Handler: "sleeper", InvocationKey: "k"}, 150*time.Millisecond)
		}()
	}
	wg.Wait()
	for i, o := range outcomes {
		if o.Kind != Timeout {
			t.Fatalf("call %d: %v %s", i, o.Kind, o.Error())
		}
	}
	if got := m.peakInstances(); got != 2 {
		t.Errorf("peak instances = %d, want the cap, 2", got)
	}
	// A call over the cap waits for an instance: with both busy sleeping
	// until their deadline, an echo call waits about that long. The
	// deadline is long beside the 200 ms asked: on a loaded machine the
	// sleepers take a while to hold their instances, and their deadline
	// runs from their start (200 ms left of 300 failed once, loaded).
	var busy sync.WaitGroup
	for range 2 {
		busy.Add(1)
		go func() {
			defer busy.Done()
			m.Invoke(context.Background(), &abi.Event{Handler: "sleeper", InvocationKey: "busy"}, time.Second)
		}()
	}
	// Queue the echo only once both sleepers hold an instance: the pool
	// says so, there is no guessing how long their start takes.
	waitInUse(t, m.pool, 2)
	o := m.Invoke(context.Background(), echoEvent("queued"), 5*time.Second)
	busy.Wait()
	if o.Kind != Success || o.Duration < 200*time.Millisecond {
		t.Errorf("the queued call: %v after %v, want success after waiting for a busy instance", o.Kind, o.Duration)
	}
	// Warm two instances, then wait for the janitor to release them.
	for range 2 {
		if o := m.Invoke(context.Background(), echoEvent("warm"), time.Second); o.Kind != Success {
			t.Fatal(o.Error())
		}
	}
	if m.pool.idleCount() == 0 {
		t.Fatal("no idle instance after a successful call")
	}
	// The janitor takes them off the idle list, then closes them: the live
	// count drops once each close has ended.
	checkfor.Nil(t, 5*time.Second, 20*time.Millisecond, func() error {
		if n := m.pool.idleCount(); n > 0 {
			return fmt.Errorf("%d idle instances were not released", n)
		}
		if n := m.liveInstances(); n != 0 {
			return fmt.Errorf("live instances = %d after release", n)
		}
		return nil
	})
}

// inUse returns how many calls hold an instance (or are creating one).
func (p *pool) inUse() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.busy
}

// waitInUse waits until n calls hold an instance of p.
func waitInUse(t *testing.T, p *pool, n int) {
	t.Helper()
	checkfor.Nil(t, 10*time.Second, time.Millisecond, func() error {
		if got := p.inUse(); got < n {
			return fmt.Errorf("%d calls hold an instance, want %d", got, n)
		}
		return nil
	})
}

// TestBrokenInstancesAreNotReused: after a trap the pool holds no instance
// from that call; the next call gets a fresh one.
func TestBrokenInstancesAreNotReused(t *testing.T) {
	s := newSandbox(t, Config{MaxInstances: 1})
	m := load(t, s, "samples/misbehaving", ModuleConfig{})
	if o := m.Invoke(context.Background(), echoEvent("a"), time.Second); o.Kind != Success {
		t.Fatal(o.Error())
	}
	created := m.createdInstances()
	if o := m.Invoke(context.Background(), &abi.Event{Handler: "crasher", InvocationKey: "b"}, 5*time.Second); o.Kind != Trap {
		t.Fatalf("%v %s", o.Kind, o.Error())
	}
	if m.pool.idleCount() != 0 || m.liveInstances() != 0 {
		t.Fatalf("the trapped instance is still pooled (idle %d, live %d)", m.pool.idleCount(), m.liveInstances())
	}
	if o := m.Invoke(context.Background(), echoEvent("c"), time.Second); o.Kind != Success {
		t.Fatal(o.Error())
	}
	if m.createdInstances() != created+1 {
		t.Errorf("instances created %d, want %d (one fresh instance after the trap)", m.createdInstances(), created+1)
	}
}

// TestEvictionDoesNotBreakCallsInFlight keeps an LRU of one compiled module
// while two modules alternate: each load evicts the other's compiled code,
// and calls on instances made before the eviction still succeed.
func TestEvictionDoesNotBreakCallsInFlight(t *testing.T) {
	s := newSandbox(t, Config{CompiledModules: 1, MaxInstances: 4})
	a := load(t, s, "samples/misbehaving", ModuleConfig{})
	b := load(t, s, "samples/bench", ModuleConfig{}) // evicts a's compiled module
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 4 {
				if i%2 == 0 {
					if o := a.Invoke(ctx, echoEvent("a"), 10*time.Second); o.Kind != Success {
						errs <- "a: " + o.Error()
					}
				} else if o := b.Invoke(ctx, orderPlaced(), 10*time.Second); o.Kind != Success {
					errs <- "b: " + o.Error()
				}
				_ = j
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if s.comp.cache.Len() != 1 {
		t.Errorf("compiled modules cached = %d, want 1", s.comp.cache.Len())
	}
}

func TestOutboundResponseIsCapped(t *testing.T) {
	big := strings.Repeat("x", 64<<10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		w.Write([]byte(big))
	}))
	defer srv.Close()
	s := newSandbox(t, Config{MaxResponseBytes: 32 << 10})
	m := notifierModule(t, s, srv.URL)
	o := m.Invoke(context.Background(), shipped("order-9", "buyer-1", 1), 5*time.Second)
	if o.Kind != GuestFailure || o.Failure.Classes[0] != retry.ClassHostError || !strings.Contains(o.Failure.Message, "exceeds 32768 bytes") {
		t.Fatalf("%v %+v", o.Kind, o.Failure)
	}
}

// TestDeadlineWhileMakingAnInstance: a call whose deadline has passed when
// no instance is idle (so the pool would make one) is never reported as a
// broken module, whether the deadline ended its wait for a slot or the
// making of the instance. (A call that got its instance and ran anyway is
// a success: the guest finished.)
func TestDeadlineWhileMakingAnInstance(t *testing.T) {
	s := newSandbox(t, Config{MaxInstances: 1})
	m := load(t, s, "samples/misbehaving", ModuleConfig{})
	for i := range 20 {
		// A trap closes its instance: none is idle after it.
		if o := m.Invoke(context.Background(), &abi.Event{Handler: "crasher", InvocationKey: "c"}, 5*time.Second); o.Kind != Trap {
			t.Fatalf("%v %s", o.Kind, o.Error())
		}
		if n := m.pool.idleCount(); n != 0 {
			t.Fatalf("%d idle instances, want none", n)
		}
		ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
		o := m.Invoke(ctx, echoEvent("late"), time.Second)
		cancel()
		if o.Kind != Timeout && o.Kind != Success {
			t.Fatalf("call %d: %v %s, want a timeout", i, o.Kind, o.Error())
		}
	}
}

// TestPoolWaiters: with the one slot taken, a call waits; one whose context
// or own deadline ends the wait gives up without keeping a slot, a waiter
// still queued gets the slot when it is returned, and closing the pool
// ends every wait with ErrClosed.
func TestPoolWaiters(t *testing.T) {
	s := newSandbox(t, Config{MaxInstances: 1})
	m := load(t, s, "samples/misbehaving", ModuleConfig{})
	bg := context.Background()
	held, err := m.pool.acquire(bg, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	canceled, cancel := context.WithCancel(bg)
	cancel()
	for _, tt := range []struct {
		name     string
		ctx      context.Context
		deadline time.Time
		want     error
	}{
		{"cancelled context", canceled, time.Time{}, context.Canceled},
		{"own deadline", bg, time.Now().Add(20 * time.Millisecond), context.DeadlineExceeded},
	} {
		if _, err := m.pool.acquire(tt.ctx, tt.deadline); !errors.Is(err, tt.want) {
			t.Fatalf("%s: err = %v, want %v", tt.name, err, tt.want)
		}
		if n := m.pool.inUse(); n != 1 {
			t.Fatalf("%s: %d slots taken after the wait ended, want the held one", tt.name, n)
		}
	}
	got := make(chan *instance)
	go func() {
		inst, err := m.pool.acquire(bg, time.Time{})
		if err != nil {
			t.Error(err)
		}
		got <- inst
	}()
	waitWaiters(t, m.pool, 1)
	m.pool.put(held, false)
	if inst := <-got; inst != held {
		t.Fatal("the waiter did not get the returned instance")
	}
	// Closing the pool ends a wait; the instance in use closes when put back.
	ended := make(chan error)
	go func() {
		_, err := m.pool.acquire(bg, time.Time{})
		ended <- err
	}()
	waitWaiters(t, m.pool, 1)
	m.pool.close()
	if err := <-ended; !errors.Is(err, ErrClosed) {
		t.Fatalf("err = %v, want ErrClosed", err)
	}
	m.pool.put(held, false)
	if n := m.pool.inUse(); n != 0 {
		t.Fatalf("%d slots taken after close, want 0", n)
	}
}

// waitWaiters waits until n calls wait for a slot of p.
func waitWaiters(t *testing.T, p *pool, n int) {
	t.Helper()
	checkfor.Nil(t, 10*time.Second, time.Millisecond, func() error {
		p.mu.Lock()
		w := len(p.waiters)
		p.mu.Unlock()
		if w < n {
			return fmt.Errorf("%d calls wait, want %d", w, n)
		}
		return nil
	})
}
