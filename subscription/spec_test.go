package subscription

import (
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berthhq/berth/retry"
)

// Module reloads (UpdateSpec, from two goroutines) and reloads of the host's
// layer (SetHostDefaults) run at once. Once a reload of the host's layer has
// returned, the subscription is never again resolved over an older layer —
// no spec resolved over the layer before undoes it — and at the end it is
// the last spec given, over the last layer. Run with -race.
func TestUpdateSpecAndReloadRaceLoseNothing(t *testing.T) {
	rec := newRecorder(nil, nil)
	e := newEnv(t, Options{}, spec(sub, rec))
	rec.clock = e.clock
	eng := e.start()
	s, err := eng.sub(sub)
	if err != nil {
		t.Fatal(err)
	}
	const n = 300
	// Each UpdateSpec goroutine's specs are told apart by MaxAttempts; each
	// host layer by its Timeout (i ms for the ith reload), which no spec
	// sets. Every other spec has many event types, so that resolving it
	// takes long enough for reloads of the host's layer to pass it by.
	types := make([]string, 5000)
	for i := range types {
		types[i] = fmt.Sprintf("Type%d", i)
	}
	specOf := func(g, i int) Spec {
		sp := spec(sub, rec)
		if i%2 == 0 {
			sp.EventTypes = types
		}
		sp.HandlerRetry = retry.Settings{MaxAttempts: g*n + i + 1}
		return sp
	}
	var specs, reloads sync.WaitGroup
	var specsDone atomic.Bool
	var reloaded atomic.Int64 // the last reload of the host's layer that returned
	for g := range 2 {
		specs.Go(func() {
			for i := range n {
				if err := eng.UpdateSpec(specOf(g, i)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	var stale atomic.Int64
	reloads.Go(func() {
		for i := int64(1); ; i++ {
			eng.SetHostDefaults(retry.Settings{Timeout: time.Duration(i) * time.Millisecond}, retry.ParkedSettings{}, nil)
			reloaded.Store(i)
			if specsDone.Load() {
				return
			}
		}
	})
	reloads.Go(func() {
		for !specsDone.Load() {
			last := reloaded.Load()
			if cur := s.cur.Load(); last > 0 && cur.policy.Timeout < time.Duration(last)*time.Millisecond {
				stale.Add(1)
			}
		}
	})
	specs.Wait()
	specsDone.Store(true)
	reloads.Wait()
	if k := stale.Load(); k != 0 {
		t.Errorf("%d times the subscription was resolved over an older host layer than one a returned reload set", k)
	}
	cur := s.cur.Load()
	if got, want := cur.policy.Timeout, time.Duration(reloaded.Load())*time.Millisecond; got != want {
		t.Errorf("timeout %v at the end, want the last host layer's %v", got, want)
	}
	if m := cur.policy.MaxAttempts; m != n && m != 2*n {
		t.Errorf("max-attempts %d at the end, want the last spec of either goroutine (%d or %d)", m, n, 2*n)
	}
	if want := resolve(cur.spec, eng.host.Load()); !reflect.DeepEqual(cur.policy, want.policy) || cur.parked != want.parked {
		t.Errorf("resolved %+v, want %+v", cur.policy, want.policy)
	}
}
