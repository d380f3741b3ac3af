package subscription

import (
	"context"
	"errors"
	"fmt"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"slices"
	"sync"
	"testing"

	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/internal/clock"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/retry"
)

// Every aggregate's events are handled once each, in version order, with
// several aggregates of a partition at once, including commits appended
// while the engine runs.
func TestDeliversEachAggregateInOrderExactlyOnce(t *testing.T) {
	clock := clock.NewFake(t0)
	rec := newRecorder(clock, nil)
	e := newEnv(t, Options{Partitions: 3, Concurrency: 4, CheckpointEvery: 7}, spec(sub, rec))
	e.clock = clock
	const aggs, versions = 20, 10
	for v := 0; v < versions/2; v++ {
		for a := range aggs {
			e.append("Order", fmt.Sprint("o", a))
		}
	}
	e.start()
	for v := versions / 2; v < versions; v++ {
		for a := range aggs {
			e.append("Order", fmt.Sprint("o", a))
		}
	}
	for a := range aggs {
		id := fmt.Sprint("o", a)
		rec.waitHandled(t, id, versions)
		if got := rec.handled(id); !slices.Equal(got, seq(1, versions)) {
			t.Fatalf("%s handled %v", id, got)
		}
	}
	checkfor.Eventually(t, func() error { return e.checkpointAt(sub, aggs*versions+1) })
	if n := len(rec.all()); n != aggs*versions {
		t.Fatalf("%d calls for %d events", n, aggs*versions)
	}
	// The key names the subscription, aggregate type and id, version and index.
	if k := rec.of("o3")[5].Key; k != sub+":Order/o3@6:0" {
		t.Fatalf("invocation key %q", k)
	}
	// The checkpoint is written on Close, and a restart delivers nothing again.
	e.restart()
	e.append("Order", "o1")
	rec.waitHandled(t, "o1", versions+1)
	if n := len(rec.all()); n != aggs*versions+1 {
		t.Fatalf("%d calls after restart, want %d", n, aggs*versions+1)
	}
}

// A new subscription starting at the end does not see history; one starting
// at the beginning does; a stored checkpoint wins over Start.
func TestStartEndBeginningAndCheckpointWins(t *testing.T) {
	clock := clock.NewFake(t0)
	endRec, begRec := newRecorder(clock, nil), newRecorder(clock, nil)
	endSpec := Spec{Processor: "Reactor", Handler: "on", Start: StartEnd, Invoker: endRec}
	begSpec := Spec{Processor: "Projection", Handler: "on", Start: StartBeginning, Invoker: begRec}
	e := newEnv(t, Options{}, endSpec, begSpec)
	e.clock = clock
	e.append("Order", "old")
	e.append("Order", "old")
	e.start()
	e.append("Order", "new")
	begRec.waitHandled(t, "new", 1)
	// "old" may be in another partition than "new", delivered after it.
	begRec.waitHandled(t, "old", 2)
	endRec.waitHandled(t, "new", 1)
	if got := endRec.handled("old"); len(got) != 0 {
		t.Fatalf("end subscription saw history: %v", got)
	}
	if got := begRec.handled("old"); !slices.Equal(got, []uint64{1, 2}) {
		t.Fatalf("beginning subscription saw %v", got)
	}
	// Events appended while stopped are delivered after the restart: the
	// stored checkpoint wins over StartEnd.
	e.eng.Close(context.Background())
	e.append("Order", "new")
	e.restart()
	endRec.waitHandled(t, "new", 2)
	if got := endRec.handled("new"); !slices.Equal(got, []uint64{1, 2}) {
		t.Fatalf("end subscription after restart saw %v", got)
	}
}

// Only the subscribed event types are delivered; other events, and commits
// without any, are passed over while the checkpoint moves past them.
func TestEventTypesFilter(t *testing.T) {
	clock := clock.NewFake(t0)
	rec := newRecorder(clock, nil)
	s := spec(sub, rec)
	s.EventTypes = []string{"OrderShipped"}
	e := newEnv(t, Options{}, s)
	e.clock = clock
	e.append("Order", "a", "OrderPlaced")
	e.append("Order", "a", "OrderPaid", "OrderShipped")
	e.append("Order", "b", "OrderPlaced")
	e.start()
	rec.waitHandled(t, "a", 1)
	checkfor.Eventually(t, func() error { return e.checkpointAt(sub, 4) })
	calls := rec.all()
	if len(calls) != 1 || calls[0].Version != 2 || calls[0].Index != 1 {
		t.Fatalf("calls %+v", calls)
	}
}

// Policies are resolved setting by setting, reported with their sources, and
// a change applies to the next attempt.
func TestPolicyLayersAndReload(t *testing.T) {
	clock := clock.NewFake(t0)
	rec := newRecorder(clock, func(d Delivery, n int) *retry.Failure {
		return &retry.Failure{Message: "down"}
	})
	s := spec(sub, rec)
	s.ProcessorRetry = retry.Settings{MaxAttempts: 7, InitialBackoff: 1e9}
	s.HandlerRetry = retry.Settings{InitialBackoff: 2e9}
	e := newEnv(t, Options{Retry: retry.Settings{Timeout: 11e9}}, s)
	e.clock = clock
	e.start()
	st := e.status(sub)
	p := st.Policy
	if p.MaxAttempts != 7 || p.InitialBackoff != 2e9 || p.Timeout != 11e9 || p.MaxBackoff != retry.DefaultMaxBackoff {
		t.Fatalf("policy %+v", p)
	}
	if p.Sources[retry.KeyMaxAttempts] != retry.SourceProcessor || p.Sources[retry.KeyInitialBackoff] != retry.SourceHandler {
		t.Fatalf("sources %v", p.Sources)
	}
	if st.ParkedSettings != retry.DefaultParked() {
		t.Fatalf("parked settings %+v", st.ParkedSettings)
	}
	e.append("Order", "a")
	e.blockUntil(1) // in the backoff after the first failure
	// Reload: the override makes the next failure the last.
	s.OverrideRetry = retry.Settings{MaxAttempts: 2}
	if err := e.eng.UpdateSpec(s); err != nil {
		t.Fatal(err)
	}
	if got := e.status(sub).Policy.Sources[retry.KeyMaxAttempts]; got != retry.SourceOverride {
		t.Fatalf("source after reload %v", got)
	}
	if d := e.advance(); d != 2e9 {
		t.Fatalf("first backoff %v, want 2s", d)
	}
	rec2 := e.waitRecord(sub, "Order", "a", func(r *ledger.Record) bool { return true })
	if rec2.Attempts != 2 {
		t.Fatalf("parked after %d attempts, want 2", rec2.Attempts)
	}
	if err := e.eng.UpdateSpec(spec("Nope.none", rec)); !errors.Is(err, ErrUnknownSubscription) {
		t.Fatalf("UpdateSpec of an unknown subscription: %v", err)
	}
}

func TestInvocationKey(t *testing.T) {
	var c eventlog.Commit
	c.AggregateType, c.AggregateID, c.Version = "T", "x", 3
	if InvocationKey("P.h", c, 2) != "P.h:T/x@3:2" {
		t.Fatal(InvocationKey("P.h", c, 2))
	}
}

// Within a partition, up to Concurrency aggregates are handled at once, but
// never two events of one aggregate.
func TestConcurrencyWithinPartition(t *testing.T) {
	var mu sync.Mutex
	inFlight := map[string]int{}
	total, peak := 0, 0
	release := make(chan struct{})
	inv := InvokerFunc(func(ctx context.Context, d Delivery) *retry.Failure {
		id := d.Commit.AggregateID
		mu.Lock()
		inFlight[id]++
		total++
		peak = max(peak, total)
		if inFlight[id] > 1 {
			t.Errorf("two events of %s at once", id)
		}
		mu.Unlock()
		block(ctx, release)
		mu.Lock()
		inFlight[id]--
		total--
		mu.Unlock()
		return nil
	})
	e := newEnv(t, Options{Partitions: 1, Concurrency: 3}, spec(sub, inv))
	unblock := unblockAtEnd(t, release)
	e.start()
	for range 3 {
		for _, id := range []string{"a", "b", "c", "d"} {
			e.append("Order", id)
		}
	}
	// The reader may hand over a, b and c before it has read d: wait for
	// both, the slots full and d waiting for one.
	var st PartitionStatus
	checkfor.Eventually(t, func() error {
		mu.Lock()
		n := total
		mu.Unlock()
		st = e.status(sub).Partitions[0]
		if n != 3 || st.Active != 3 || st.Waiting != 1 {
			return fmt.Errorf("%d calls in flight, %d aggregates active and %d waiting; want 3, 3 and 1", n, st.Active, st.Waiting)
		}
		return nil
	})
	unblock()
	checkfor.Eventually(t, func() error { return e.checkpointAt(sub, 13) })
	if peak != 3 {
		t.Fatalf("peak concurrency %d", peak)
	}
}
