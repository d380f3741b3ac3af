package subscription

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/clock"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/retry"
	"github.com/berthhq/berth/wasm/abi"
)

// Aggregates of different types with the same id, and ids made of the key's
// own separators, each get a key of their own, which names them.
func TestInvocationKeysAreDistinctPerAggregate(t *testing.T) {
	rec := newRecorder(clock.NewFake(t0), nil)
	e := newEnv(t, Options{}, spec(sub, rec))
	e.start()
	aggs := []struct{ typ, id string }{
		{"Thing", "dup-1"}, {"Other", "dup-1"},
		{"T", "a:b@1"}, {"T", "a"}, {"T", "a:b"}, {"T:a", "b@1"},
		{"T", "a/b"}, {"T", "a%2Fb"}, {"T", "x@1:0"}, {"T", "x"},
		{"T", "sp ace"}, {"T", "größe"},
	}
	for _, a := range aggs {
		e.append(a.typ, a.id, "OrderShipped", "OrderShipped") // two events: indexes 0 and 1
	}
	checkfor.Eventually(t, func() error {
		if n := len(rec.all()); n != 2*len(aggs) {
			return fmt.Errorf("%d events delivered, want %d", n, 2*len(aggs))
		}
		return nil
	})
	seen := map[string]call{}
	for _, c := range rec.all() {
		if other, dup := seen[c.Key]; dup {
			t.Fatalf("%+v and %+v were both given key %q", c, other, c.Key)
		}
		seen[c.Key] = c
		p, err := abi.ParseInvocationKey(c.Key)
		if err != nil {
			t.Fatal(err)
		}
		if p.Subscription != sub || p.AggregateID != c.Agg || p.Version != c.Version || p.Index != c.Index {
			t.Errorf("key %q names %+v, the call was %+v", c.Key, p, c)
		}
	}
	for _, a := range aggs {
		for idx := range 2 {
			if k := abi.InvocationKey(sub, a.typ, a.id, 1, idx); seen[k].Agg != a.id {
				t.Errorf("no call of %s/%s with key %q", a.typ, a.id, k)
			}
		}
	}
}

// keyEnv parks Thing/p at version 1 (a budget of one attempt, then parked
// retries) with a version 2 held behind it; fail says whether it fails.
func keyEnv(t *testing.T, fail *atomic.Bool) (*env, *recorder) {
	clock := clock.NewFake(t0)
	rec := newRecorder(clock, func(d Delivery, n int) *retry.Failure {
		if fail.Load() {
			return &retry.Failure{Message: "down"}
		}
		return nil
	})
	s := spec(sub, rec)
	s.OverrideRetry = retry.Settings{MaxAttempts: 1}
	e := newEnv(t, Options{}, s)
	e.clock = clock
	e.start()
	e.append("Thing", "p")
	e.waitRecord(sub, "Thing", "p", func(*ledger.Record) bool { return true })
	e.append("Thing", "p")
	return e, rec
}

// A park stores the key the event was delivered with; the parked retries and
// a resume give the event that key, and later events their own.
func TestParkedRecordKeepsItsKey(t *testing.T) {
	var fail atomic.Bool
	fail.Store(true)
	e, rec := keyEnv(t, &fail)
	want := abi.InvocationKey(sub, "Thing", "p", 1, 0)
	r := e.record(sub, "Thing", "p")
	if r.InvocationKey != want {
		t.Fatalf("record keeps key %q, want %q", r.InvocationKey, want)
	}
	e.advance() // the first parked retry fails
	e.waitRecord(sub, "Thing", "p", func(r *ledger.Record) bool { return r.ParkedRetries == 1 })
	fail.Store(false)
	if err := e.eng.Resume(context.Background(), sub, "Thing", "p", Caller{Actor: "alice", Reason: "fixed"}); err != nil {
		t.Fatal(err)
	}
	rec.waitHandled(t, "p", 2)
	got := keysOf(rec.of("p"))
	if len(got) != 4 || got[0] != want || got[1] != want || got[2] != want ||
		got[3] != abi.InvocationKey(sub, "Thing", "p", 2, 0) {
		t.Fatalf("keys %q", got)
	}
}

// A record written before records kept their key (the shape the old version
// wrote: no invocationKey) goes on with the old form of the key for the event
// it was parked at — through its parked retries, an operator's resume, and a
// resume that was under way at the upgrade — while later events (and the
// event a skip moves it to) get the new form.
func TestRecordParkedBeforeTheUpgradeKeepsTheOldKey(t *testing.T) {
	first := abi.InvocationKey(sub, "Thing", "p", 1, 0) // delivered by this version before the "upgrade"
	old := sub + ":p@1:0"                               // the form the old version delivered the event with
	next := abi.InvocationKey(sub, "Thing", "p", 2, 0)
	resume := func(t *testing.T, e *env) {
		if err := e.eng.Resume(context.Background(), sub, "Thing", "p", Caller{Actor: "alice", Reason: "fixed"}); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name     string
		resuming bool // the old record says a resume was under way
		goOn     func(t *testing.T, e *env, fail *atomic.Bool)
		handled  int      // successful calls of p in all
		want     []string // the keys of p's calls
	}{
		{"parked retry fails, then resume", false, func(t *testing.T, e *env, fail *atomic.Bool) {
			e.advance()
			e.waitRecord(sub, "Thing", "p", func(r *ledger.Record) bool { return r.ParkedRetries == 1 })
			if r := e.record(sub, "Thing", "p"); r.InvocationKey != "" {
				t.Errorf("a parked retry rewrote the old record's key as %q", r.InvocationKey)
			}
			fail.Store(false)
			resume(t, e)
		}, 2, []string{first, old, old, next}},
		{"parked retry succeeds", false, func(t *testing.T, e *env, fail *atomic.Bool) {
			fail.Store(false)
			e.advance()
		}, 2, []string{first, old, next}},
		{"operator resume", false, func(t *testing.T, e *env, fail *atomic.Bool) {
			fail.Store(false)
			resume(t, e)
		}, 2, []string{first, old, next}},
		{"skip", false, func(t *testing.T, e *env, fail *atomic.Bool) {
			fail.Store(false)
			if err := e.eng.Skip(context.Background(), sub, "Thing", "p", 1, Caller{Actor: "alice", Reason: "bad data"}); err != nil {
				t.Fatal(err)
			}
		}, 1, []string{first, next}},
		{"resume under way at the upgrade", true, func(*testing.T, *env, *atomic.Bool) {}, 2, []string{first, old, next}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var fail atomic.Bool
			fail.Store(true)
			e, rec := keyEnv(t, &fail)
			if err := e.eng.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			e.eng = nil
			r := e.record(sub, "Thing", "p")
			r.InvocationKey = ""
			if tt.resuming {
				r.State, r.NextRetry = ledger.StateResuming, time.Time{}
				fail.Store(false)
			}
			writeOldRecord(t, e, r)
			e.start()
			tt.goOn(t, e, &fail)
			rec.waitHandled(t, "p", tt.handled)
			checkfor.Eventually(t, func() error { return e.recordGone("Thing", "p") })
			if got := keysOf(rec.of("p")); !slices.Equal(got, tt.want) {
				t.Fatalf("keys %q, want %q", got, tt.want)
			}
		})
	}
}

// A retry budget recorded before budgets kept their key goes on with the old
// form, and the park that spends it stores that form.
func TestBudgetSpentBeforeTheUpgradeKeepsTheOldKey(t *testing.T) {
	clock := clock.NewFake(t0)
	rec := newRecorder(clock, func(Delivery, int) *retry.Failure { return &retry.Failure{Message: "down"} })
	s := spec(sub, rec)
	s.OverrideRetry = retry.Settings{MaxAttempts: 2}
	e := newEnv(t, Options{}, s)
	e.clock = clock
	e.start()
	e.append("Thing", "b:1")
	bk := budgetKey(aggKey{"Thing", "b:1"})
	checkfor.Eventually(t, func() error {
		return e.store.View(context.Background(), func(tx ledger.Tx) error {
			_, err := tx.Meta(sub, bk)
			return err
		})
	})
	if err := e.eng.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.eng = nil
	err := e.store.Update(context.Background(), func(tx ledger.Tx) error {
		b, err := tx.Meta(sub, bk)
		if err != nil {
			return err
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			return err
		}
		if m["key"] != abi.InvocationKey(sub, "Thing", "b:1", 1, 0) {
			t.Errorf("the budget keeps key %v: %s", m["key"], b)
		}
		delete(m, "key") // the shape the old version wrote
		b, _ = json.Marshal(m)
		return tx.SetMeta(sub, bk, b)
	})
	if err != nil {
		t.Fatal(err)
	}
	e.start()
	r := e.waitRecord(sub, "Thing", "b:1", func(*ledger.Record) bool { return true })
	old := sub + ":b:1@1:0"
	if got := keysOf(rec.of("b:1")); !slices.Equal(got, []string{abi.InvocationKey(sub, "Thing", "b:1", 1, 0), old}) {
		t.Fatalf("keys %q", got)
	}
	if r.InvocationKey != old || r.Attempts != 2 {
		t.Fatalf("record keeps key %q after %d attempts, want %q after 2", r.InvocationKey, r.Attempts, old)
	}
}

// writeOldRecord stores r through the ledger API as the old version did.
func writeOldRecord(t *testing.T, e *env, r *ledger.Record) {
	t.Helper()
	if b, _ := json.Marshal(r); json.Valid(b) && containsKey(b, "invocationKey") {
		t.Fatalf("a record without a key still encodes one: %s", b)
	}
	if err := e.store.Update(context.Background(), func(tx ledger.Tx) error { return tx.PutParked(r) }); err != nil {
		t.Fatal(err)
	}
}

func containsKey(b []byte, k string) bool {
	var m map[string]json.RawMessage
	json.Unmarshal(b, &m)
	_, ok := m[k]
	return ok
}

func keysOf(calls []call) []string {
	var out []string
	for _, c := range calls {
		out = append(out, c.Key)
	}
	return out
}
