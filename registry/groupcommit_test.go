package registry_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/assembly"
	"github.com/berthhq/berth/config"
	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/internal/testing/testbuild"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/registry"
	"github.com/berthhq/berth/retry"
	"github.com/berthhq/berth/subscription"
)

// eachEventWasm builds registry/testdata/eachevent once per test binary.
var eachEventWasm = sync.OnceValues(func() ([]byte, error) { return testbuild.Bytes("registry/testdata/eachevent") })

const eachEventSub = "EachEvent.onEvent"

// holdStore runs a ledger transaction that stays open until the returned
// function is called: every other write of the ledger waits for it (the
// ledger runs one at a time), so the query store is as busy as it can be.
func holdStore(t *testing.T, store ledger.Store) (release func()) {
	t.Helper()
	entered, held, ended := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		ended <- store.Update(context.Background(), func(ledger.Tx) error {
			close(entered)
			<-held
			return nil
		})
	}()
	<-entered
	var once sync.Once
	release = func() {
		once.Do(func() {
			close(held)
			if err := <-ended; err != nil {
				t.Errorf("the holding transaction: %v", err)
			}
		})
	}
	t.Cleanup(release)
	return release
}

// callLog keeps the messages a guest logged, by invocation key.
type callLog struct {
	mu   sync.Mutex
	msgs map[string][]string
}

func (l *callLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *callLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *callLog) WithGroup(string) slog.Handler            { return l }

// Handle records a guest's "handled" line by its key, rendered with the
// guest's fields ("handled attempt=1").
func (l *callLog) Handle(_ context.Context, r slog.Record) error {
	if !strings.HasPrefix(r.Message, "handled") {
		return nil
	}
	key, msg := "", r.Message
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "key":
			key = a.Value.String()
		case "fields":
			for _, f := range a.Value.Group() {
				msg += fmt.Sprintf(" %s=%v", f.Key, f.Value)
			}
		}
		return true
	})
	if key != "" {
		l.mu.Lock()
		l.msgs[key] = append(l.msgs[key], msg)
		l.mu.Unlock()
	}
	return nil
}

func (l *callLog) snapshot() map[string][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string][]string, len(l.msgs))
	for k, v := range l.msgs {
		out[k] = v
	}
	return out
}

// Every one of the engine's 128 deliveries in flight (16 partitions x 4,
// and as many more that gave their slots up to wait for the store,
// subscription.LeaveSlot) finds the query store busy at once, with 8
// writers to a transaction: none
// fails for it. Each event's guest runs exactly once, at its first attempt
// (so nothing was charged to a budget), every partition keeps its
// concurrency (no backpressure lowered it), and every event's write is in
// the read model.
func TestProjectionBusyStoreRunsEachGuestOnce(t *testing.T) {
	t.Parallel()
	wasm, err := eachEventWasm()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cfg := config.Default()
	cfg.Server.DataDir = t.TempDir()
	cfg.Subscription.Partitions, cfg.Subscription.Concurrency, cfg.Subscription.ProjectionWriters = 16, 4, 8
	// Only Close writes the checkpoint, so that no checkpoint write waits
	// behind the held store with a partition's loop.
	cfg.Subscription.CheckpointEvery = 1 << 20
	cfg.Subscription.CheckpointInterval = retry.Duration(time.Hour)
	calls := &callLog{msgs: map[string][]string{}}
	asm, err := assembly.Open(ctx, cfg, assembly.Options{Logger: slog.New(calls)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { asm.Close(context.Background()) })
	if _, _, err := asm.Modules.Put(ctx, "each-event", wasm); err != nil {
		t.Fatal(err)
	}

	release := holdStore(t, asm.Ledger)
	const events = 256 // over as many aggregates: every partition has more than 8
	for i := range events {
		if _, err := asm.Events.Append(ctx, eventlog.AppendRequest{AggregateType: "Thing", AggregateID: fmt.Sprint("t", i),
			ExpectedVersion: eventlog.AnyVersion, Events: []eventlog.Event{{Type: "Happened"}}}); err != nil {
			t.Fatal(err)
		}
	}
	const concurrent = 16 * 4 * 2
	projEventually(t, func() error { return waiting(asm.Projections, concurrent) })
	release()
	projEventually(t, func() error { return caughtUp(asm.Engine.Status(ctx, eachEventSub)) })

	got := calls.snapshot()
	if len(got) != events {
		t.Errorf("%d events' guests ran, want %d", len(got), events)
	}
	for key, msgs := range got {
		if len(msgs) != 1 || msgs[0] != "handled attempt=1" {
			t.Errorf("%s: the guest ran %d times: %q, want once at attempt 1", key, len(msgs), msgs)
		}
	}
	st, err := asm.Engine.Status(ctx, eachEventSub)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range st.Partitions {
		if p.Concurrency != p.MaxConcurrency {
			t.Errorf("partition %d: concurrency lowered to %d of %d", p.Index, p.Concurrency, p.MaxConcurrency)
		}
	}
	for state, n := range st.Parked {
		if n != 0 {
			t.Errorf("%d aggregates %s", n, state)
		}
	}
	if err := asm.Ledger.View(ctx, func(tx ledger.Tx) error {
		for key := range got {
			if _, err := tx.ProjectionGet(eachEventSub, "event/"+key); err != nil {
				t.Errorf("%s: %v", key, err)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// groupCall is one call of a group in TestGroupCommit: what it read from
// the store before the group (keys that were absent), what it writes, and
// what its apply returns.
type groupCall struct {
	reads  []string
	writes map[string]int // key -> value size in bytes
	want   error          // nil, or the error it is
}

// A group of calls is applied in one transaction, each with its own mark;
// a call whose read another call of the group changed is left out alone,
// and a call whose writes cannot be stored (too big for a transaction)
// fails alone, the calls grouped with it applied.
func TestGroupCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// A 4 MiB memtable: about 600 KiB per transaction.
	store, err := ledger.Open(t.TempDir(), ledger.Options{MemTableSize: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close(context.Background()) })
	proj := registry.NewProjections(store, func() int { return 64 }, nil)
	const sub = "P.h"
	tests := []struct {
		name  string
		calls []groupCall
	}{
		{"disjoint", []groupCall{{writes: map[string]int{"a": 1}}, {writes: map[string]int{"b": 1}}}},
		{"a read changed by the group", []groupCall{
			{writes: map[string]int{"k": 1}},
			{reads: []string{"k"}, writes: map[string]int{"from-reader": 1}, want: registry.ErrProjectionConflict},
			{reads: []string{"other"}, writes: map[string]int{"from-other": 1}}}},
		{"too big together, not alone", []groupCall{
			{writes: map[string]int{"big1": 250 << 10}}, {writes: map[string]int{"big2": 250 << 10}},
			{writes: map[string]int{"big3": 250 << 10}}}},
		{"one too big alone", []groupCall{
			{writes: map[string]int{"small1": 1}}, {writes: map[string]int{"huge1": 250 << 10, "huge2": 250 << 10, "huge3": 250 << 10}, want: ledger.ErrTooBig},
			{writes: map[string]int{"small2": 1}}}},
	}
	for ti, tc := range tests {
		release := holdStore(t, store)
		results := make([]chan error, len(tc.calls)+1)
		submit := func(i int, c groupCall) {
			kv := registry.NewCallKV(ctx, store, sub)
			for _, k := range c.reads {
				if _, _, err := kv.Get(k); err != nil {
					t.Fatal(err)
				}
			}
			for k, n := range c.writes {
				_ = kv.Put(k, make([]byte, n))
			}
			d := &subscription.Delivery{Commit: eventlog.Commit{AggregateType: "A", AggregateID: fmt.Sprint(ti, "-", i), Version: 1,
				Events: []eventlog.Event{{Type: "X"}}}}
			results[i] = make(chan error, 1)
			go func() { results[i] <- proj.Apply(ctx, sub, kv, d) }()
			projEventually(t, func() error { return waiting(proj, i+1) })
		}
		// The first call is taken into a transaction of its own, which waits
		// for the held store; the calls after it queue for the next group.
		submit(0, groupCall{writes: map[string]int{fmt.Sprint("first-", ti): 1}})
		for i, c := range tc.calls {
			submit(i+1, c)
		}
		release()
		if err := <-results[0]; err != nil {
			t.Errorf("%s: the first call: %v", tc.name, err)
		}
		for i, c := range tc.calls {
			err := <-results[i+1]
			if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
				t.Errorf("%s: call %d: %v, want %v", tc.name, i, err, c.want)
			}
			if err := store.View(ctx, func(tx ledger.Tx) error {
				for k := range c.writes {
					_, err := tx.ProjectionGet(sub, k)
					if applied := err == nil; applied != (c.want == nil) {
						t.Errorf("%s: call %d: key %s applied %v (%v)", tc.name, i, k, applied, err)
					}
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		if err := store.Update(ctx, func(tx ledger.Tx) error { return tx.ClearProjection(sub) }); err != nil {
			t.Fatal(err)
		}
	}
}
