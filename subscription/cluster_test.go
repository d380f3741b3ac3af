package subscription

import (
	"context"
	"errors"
	"fmt"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/internal/clock"
	"github.com/berthhq/berth/internal/testing/syncbuf"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/retry"
)

// host opens and starts an engine of host id over the env's stores (one
// event log and one ledger, shared with every other host of the test).
func (e *env) host(id string, opts Options, specs ...Spec) *Engine {
	e.t.Helper()
	opts.Host, opts.Clock = id, e.clock
	if opts.Jitter == nil {
		opts.Jitter = func() float64 { return 0.5 }
	}
	eng, err := Open(e.eventLog(), e.store, opts, specs...)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := eng.Start(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { closeWithin(e.t, eng) }) // before the stores close
	return eng
}

// claim makes host the owner of each partition at epoch, as the cluster's
// membership does before it hands partitions over.
func (e *env) claim(host string, epoch uint64, parts ...int) map[int]uint64 {
	e.t.Helper()
	owned := map[int]uint64{}
	if err := e.store.Update(context.Background(), func(tx ledger.Tx) error {
		for _, p := range parts {
			if err := tx.ClaimPartition(sub, p, host, epoch); err != nil {
				return err
			}
			owned[p] = epoch
		}
		return nil
	}); err != nil {
		e.t.Fatal(err)
	}
	return owned
}

func own(t *testing.T, eng *Engine, owned map[int]uint64) {
	t.Helper()
	if err := eng.Own(context.Background(), sub, owned); err != nil {
		t.Fatal(err)
	}
}

// atLeastOnceInOrder checks an aggregate's handled versions against
// at-least-once delivery in order: every version 1..n is there, and none
// comes before the one preceding it was handled (a redelivery goes back and
// on from there, never ahead). It returns how many were handled twice.
func atLeastOnceInOrder(t *testing.T, id string, got []uint64, n uint64) int {
	t.Helper()
	high := uint64(0)
	for _, v := range got {
		if v > high+1 {
			t.Fatalf("%s handled %v: version %d before %d", id, got, v, high+1)
		}
		high = max(high, v)
	}
	if high != n {
		t.Fatalf("%s handled %v, want every version to %d", id, got, n)
	}
	return len(got) - int(n)
}

// Two hosts on one event log and one ledger, each owning half the
// partitions: every event is handled exactly once between them, each by
// the owner of its aggregate's partition, in order.
func TestTwoHostsShareTheWorkExactlyOnce(t *testing.T) {
	clock := clock.NewFake(t0)
	recA, recB := newRecorder(clock, nil), newRecorder(clock, nil)
	const parts, aggs, versions = 4, 24, 5
	opts := Options{Partitions: parts, Concurrency: 2, CheckpointEvery: 3}
	e := newEnv(t, opts)
	e.clock = clock
	a := e.host("A", opts, spec(sub, recA))
	b := e.host("B", opts, spec(sub, recB))
	own(t, a, e.claim("A", 1, 0, 1))
	own(t, b, e.claim("B", 1, 2, 3))
	for range versions {
		for i := range aggs {
			e.append("Order", fmt.Sprint("t", i))
		}
	}
	for i := range aggs {
		id := fmt.Sprint("t", i)
		mine, other := recA, recB
		if eventlog.PartitionOf("Order", id, parts) >= 2 {
			mine, other = recB, recA
		}
		mine.waitHandled(t, id, versions)
		if got := mine.handled(id); !slices.Equal(got, seq(1, versions)) {
			t.Fatalf("%s handled %v by its owner", id, got)
		}
		if calls := other.of(id); len(calls) != 0 {
			t.Fatalf("%s delivered by the host that does not own it: %+v", id, calls)
		}
	}
	if n := len(recA.all()) + len(recB.all()); n != aggs*versions {
		t.Fatalf("%d calls for %d events", n, aggs*versions)
	}
	for name, eng := range map[string]*Engine{"A": a, "B": b} {
		st, err := eng.Status(context.Background(), sub)
		if err != nil {
			t.Fatal(err)
		}
		if st.Host != name || st.PartitionCount != parts || len(st.Partitions) != 2 || st.Fencings != 0 {
			t.Fatalf("%s: status %+v", name, st)
		}
		for _, p := range st.Partitions {
			if p.Epoch != 1 || p.Fenced {
				t.Fatalf("%s: partition %+v", name, p)
			}
		}
	}
	// Each host's checkpoints are its partitions' own.
	checkfor.Eventually(t, func() error {
		cps, _, _ := e.partitionCheckpoints(parts)
		if want := []uint64{aggs*versions + 1, aggs*versions + 1, aggs*versions + 1, aggs*versions + 1}; !slices.Equal(cps, want) {
			return fmt.Errorf("partition checkpoints %v, want %v", cps, want)
		}
		return nil
	})
}

// A partition moves from host A to host B mid-stream: A is told it no
// longer owns it (an attempt in flight there is cancelled, not counted),
// the partition is claimed for B at a later epoch, and B is told it owns
// it. No event is lost, each aggregate's order holds, and A does nothing for
// the partition once Own returned (and is never fenced). What is handled
// twice is what at-least-once from a checkpoint allows: a partition's
// checkpoint is its lowest unfinished position, so a run stopped delivers
// again the events its partitions finished above it — exactly those of the
// moved partition A finished at or above the checkpoint it left (the held
// attempt's position, or an attempt's in flight below it), and at most MaxInFlight
// positions of every other partition whose run stopped.
func TestMovingAPartitionLosesNothingAndKeepsOrder(t *testing.T) {
	clock := clock.NewFake(t0)
	const parts, conc, aggs, versions, window = 4, 2, 24, 6, 16
	moved := 1
	held := idsIn(moved, parts, 1, "h")[0] // its version 2 is in flight at A when the partition moves
	inFlight := make(chan struct{})
	var once sync.Once
	var given atomic.Bool // A was told it no longer owns the partition
	var afterwards atomic.Int32
	recA, recB := newRecorder(clock, nil), newRecorder(clock, nil)
	invA := InvokerFunc(func(ctx context.Context, d Delivery) *retry.Failure {
		if given.Load() && eventlog.PartitionOf("Order", d.Commit.AggregateID, parts) == moved {
			afterwards.Add(1)
		}
		if d.Commit.AggregateID == held && d.Commit.Version == 2 {
			once.Do(func() { close(inFlight) })
			<-ctx.Done()
			return &retry.Failure{Classes: []string{retry.ClassCanceled}, Message: "cancelled"}
		}
		return recA.Invoke(ctx, d)
	})
	opts := Options{Partitions: parts, Concurrency: conc, CheckpointEvery: 5, MaxInFlight: window}
	e := newEnv(t, opts)
	e.clock = clock
	a := e.host("A", opts, spec(sub, invA))
	b := e.host("B", opts, spec(sub, recB))
	ownedA := e.claim("A", 1, 0, 1)
	ownedB := e.claim("B", 1, 2, 3)
	own(t, a, ownedA)
	own(t, b, ownedB)
	ids := []string{held}
	for i := range aggs - 1 {
		ids = append(ids, fmt.Sprint("m", i))
	}
	pos := map[string]uint64{} // id@version → position
	appendAll := func() {
		for _, id := range ids {
			c := e.append("Order", id)
			pos[fmt.Sprint(id, "@", c.Version)] = c.Position
		}
	}
	for range versions / 2 {
		appendAll()
	}
	recv(t, inFlight, "the held attempt in flight")
	delete(ownedA, moved)
	own(t, a, ownedA)
	given.Store(true)
	// Where B starts the moved partition: A's checkpoint of it, its lowest
	// unfinished position — the held attempt's, or lower when another
	// attempt (Concurrency is 2) was in flight below it when A stopped.
	var from uint64
	if err := e.store.View(t.Context(), func(tx ledger.Tx) error {
		var err error
		from, _, err = tx.PartitionCheckpoint(sub, moved)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for p, ep := range e.claim("B", 2, moved) {
		ownedB[p] = ep
	}
	own(t, b, ownedB)
	for range versions - versions/2 {
		appendAll()
	}
	if heldAt := pos[held+"@2"]; from == 0 || from > heldAt {
		t.Fatalf("A left the moved partition at checkpoint %d, want at most the held attempt's position %d", from, heldAt)
	}
	twiceMoved, twiceElsewhere, aboveFrom := 0, 0, 0
	for _, id := range ids {
		checkfor.Eventually(t, func() error {
			if a, b := recA.handled(id), recB.handled(id); !slices.Contains(a, versions) && !slices.Contains(b, versions) {
				return fmt.Errorf("%s handled %v by A and %v by B, want its last version %d", id, a, b, versions)
			}
			return nil
		})
		byA, byB := recA.handled(id), recB.handled(id)
		p := eventlog.PartitionOf("Order", id, parts)
		if p != moved && (len(byA) == 0) == (p < 2) {
			t.Fatalf("%s of partition %d handled by the wrong host", id, p)
		}
		n := atLeastOnceInOrder(t, id, append(byA, byB...), versions)
		if p != moved {
			twiceElsewhere += n
			continue
		}
		twiceMoved += n
		for _, v := range byA {
			if pos[fmt.Sprint(id, "@", v)] >= from {
				aboveFrom++
			}
		}
	}
	if twiceMoved != aboveFrom {
		t.Fatalf("the moved partition handled %d events twice, want the %d A handled at or above its checkpoint %d", twiceMoved, aboveFrom, from)
	}
	// Three partitions besides the moved one were in a run that stopped.
	if bound := window * 3; twiceElsewhere > bound {
		t.Fatalf("%d events of the other partitions handled twice, more than the %d their stopped windows allow", twiceElsewhere, bound)
	}
	if n := afterwards.Load(); n != 0 {
		t.Fatalf("A delivered %d events of the partition after it was given away", n)
	}
	if got := recB.handled(held); !slices.Equal(got, seq(2, versions)) || !slices.Equal(recA.handled(held), []uint64{1}) {
		t.Fatalf("%s handled %v by A, %v by B; want 1 by A, the rest (the cancelled 2 on) by B", held, recA.handled(held), got)
	}
	for name, eng := range map[string]*Engine{"A": a, "B": b} {
		st, err := eng.Status(context.Background(), sub)
		if err != nil {
			t.Fatal(err)
		}
		if st.Fencings != 0 {
			t.Fatalf("%s was fenced %d times: it wrote for a partition it no longer owned", name, st.Fencings)
		}
	}
	t.Logf("handled twice: %d of the moved partition, %d of the others, of %d events", twiceMoved, twiceElsewhere, aggs*versions)
}

// Another host claims a partition behind this host's back, while an
// aggregate of it is in its backoff: the next failure would park it, but
// the park's transaction is fenced, so the host stops that partition at
// once — nothing parked, notified or charged, said once in the log and
// counted in Status — and goes on with its other partitions, passing over
// the lost partition's new commits.
func TestFencedPartitionStopsWithoutParkingOrCharging(t *testing.T) {
	clock := clock.NewFake(t0)
	const parts = 4
	failing := idsIn(0, parts, 1, "f")[0]
	later := idsIn(0, parts, 2, "g")[1]
	other := idsIn(1, parts, 1, "k")[0]
	rec := newRecorder(clock, func(d Delivery, _ int) *retry.Failure {
		if d.Commit.AggregateID == failing {
			return &retry.Failure{Message: "down"}
		}
		return nil
	})
	s := spec(sub, rec)
	s.OverrideRetry = retry.Settings{MaxAttempts: 2}
	var logs syncbuf.Buffer
	opts := Options{Partitions: parts, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	e := newEnv(t, opts)
	e.clock = clock
	a := e.host("A", opts, s)
	own(t, a, e.claim("A", 1, 0, 1, 2, 3))
	e.append("Order", failing)
	e.blockUntil(1) // attempt 1 failed and was charged; its backoff runs
	e.claim("B", 2, 0)
	e.advance() // attempt 2 fails: the park's transaction is fenced
	status := func() Status {
		st, err := a.Status(context.Background(), sub)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	checkfor.Eventually(t, func() error {
		if p := status().Partitions[0]; !p.Fenced {
			return fmt.Errorf("partition 0 not fenced: %+v", p)
		}
		return nil
	})
	e.append("Order", later)
	e.append("Order", other)
	rec.waitHandled(t, other, 1)
	checkfor.Eventually(t, func() error {
		if st := status(); st.Checkpoint != st.Head+1 || st.Lag != 0 {
			return fmt.Errorf("the reader at checkpoint %d, head %d, lag %d", st.Checkpoint, st.Head, st.Lag)
		}
		return nil
	})
	st := status()
	if st.Fencings != 1 || st.Partitions[1].Fenced || len(st.Partitions) != parts {
		t.Fatalf("status %+v", st)
	}
	if calls := rec.of(later); len(calls) != 0 {
		t.Fatalf("a commit of the lost partition delivered: %+v", calls)
	}
	if r := e.record(sub, "Order", failing); r != nil {
		t.Fatalf("parked though fenced: %+v", r)
	}
	if ns := e.notifications(); len(ns) != 0 {
		t.Fatalf("notified though fenced: %v", notificationTypes(ns))
	}
	// The budget stays as attempt 1 left it: attempt 2 was not charged.
	var b []byte
	if err := e.store.View(context.Background(), func(tx ledger.Tx) error {
		var err error
		b, err = tx.Meta(sub, budgetKey(aggKey{"Order", failing}))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"failures":1,`) {
		t.Fatalf("stored budget %s, want 1 failure", b)
	}
	if n := strings.Count(logs.String(), "partition fenced"); n != 1 {
		t.Fatalf("fencing said %d times:\n%s", n, logs.String())
	}
	if calls := rec.of(failing); len(calls) != 2 {
		t.Fatalf("%d attempts after the fence, want the 2 made", len(calls))
	}
	// An operator's call for the lost partition is refused here: its owner
	// must be asked.
	if err := a.Resume(context.Background(), sub, "Order", failing, Caller{Actor: "op", Reason: "x"}); !errors.Is(err, ErrNotOwned) {
		t.Fatalf("resume on the fenced host: %v, want ErrNotOwned", err)
	}
}

// Own needs a host id, and partitions in range; a host told nothing owns
// nothing and delivers nothing.
func TestOwnRefusesBadInput(t *testing.T) {
	clock := clock.NewFake(t0)
	rec := newRecorder(clock, nil)
	e := newEnv(t, Options{Partitions: 2}, spec(sub, rec))
	e.clock = clock
	single := e.start()
	if err := single.Own(context.Background(), sub, map[int]uint64{0: 1}); !errors.Is(err, ErrBadPartition) {
		t.Fatalf("Own on a single host: %v", err)
	}
	a := e.host("A", Options{Partitions: 2}, spec("Other.h", rec))
	if err := a.Own(context.Background(), "Other.h", map[int]uint64{2: 1}); !errors.Is(err, ErrBadPartition) {
		t.Fatalf("Own of partition 2 of 2: %v", err)
	}
	if err := a.Own(context.Background(), "Nope.h", map[int]uint64{0: 1}); !errors.Is(err, ErrUnknownSubscription) {
		t.Fatalf("Own of an unknown subscription: %v", err)
	}
	st, err := a.Status(context.Background(), "Other.h")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Partitions) != 0 || st.Lag != 0 {
		t.Fatalf("a host told nothing: %+v", st)
	}
}
