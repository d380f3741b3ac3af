package registry_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/assembly"
	"github.com/berthhq/berth/config"
	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/internal/testing/testbuild"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/registry"
	"github.com/berthhq/berth/retry"
	"github.com/berthhq/berth/subscription"
	"github.com/berthhq/berth/wasm/abi"
)

// The projection tests run the order-summary sample, compiled to wasm, in a
// host (assembly) over a temporary directory: the real sandbox, a
// Badger event log and ledger, a real engine.

const summarySub = "OrderSummary.onOrder"

// orderSummaryWasm builds the sample once per test binary.
var orderSummaryWasm = sync.OnceValues(func() ([]byte, error) { return testbuild.Bytes("samples/order-summary") })

type orderSummary struct {
	Orders  int   `json:"orders"`
	Shipped int   `json:"shipped"`
	Total   int64 `json:"total"`
}

// projEnv is a host, opened and closed as a whole; its parts are named
// for the tests' use.
type projEnv struct {
	t      *testing.T
	cfg    *config.Config
	asm    *assembly.Host
	events eventlog.Log
	store  ledger.Store
	eng    *subscription.Engine
	reg    *registry.Registry
	proj   *registry.Projections
}

func newProjEnv(t *testing.T, writers int) *projEnv {
	t.Helper()
	wasm, err := orderSummaryWasm()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := config.Default()
	cfg.Server.DataDir = dir
	cfg.Subscription.ProjectionWriters = writers
	cfg.Subscription.Retry.MaxAttempts = 2
	cfg.Subscription.Retry.InitialBackoff = retry.Duration(time.Millisecond)
	cfg.Subscription.Retry.MaxBackoff = retry.Duration(time.Millisecond)
	cfg.Subscription.Parked.MaxRetries = -1
	cfg.Subscription.Partitions = 4
	cfg.Subscription.Concurrency = 4
	// Only Close writes the checkpoint: a crash redelivers everything.
	cfg.Subscription.CheckpointEvery = 1 << 20
	cfg.Subscription.CheckpointInterval = retry.Duration(time.Hour)
	e := &projEnv{t: t, cfg: cfg}
	e.open()
	t.Cleanup(e.close)
	if _, _, err := e.reg.Put(context.Background(), "order-summary", wasm); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *projEnv) open() {
	e.t.Helper()
	asm, err := assembly.Open(context.Background(), e.cfg, assembly.Options{})
	if err != nil {
		e.t.Fatal(err)
	}
	e.asm, e.events, e.store, e.eng, e.reg, e.proj = asm, asm.Events, asm.Ledger, asm.Engine, asm.Modules, asm.Projections
}

func (e *projEnv) close() {
	e.asm.Close(context.Background())
}

// crash closes everything and rewinds the durable checkpoint to the start,
// as if the host died before it wrote any: every event is delivered again.
func (e *projEnv) crash() {
	e.t.Helper()
	e.eng.Close(context.Background())
	if err := e.store.Update(context.Background(), func(tx ledger.Tx) error {
		return tx.SetCheckpoint(summarySub, 1)
	}); err != nil {
		e.t.Fatal(err)
	}
	e.close()
	e.open()
}

func (e *projEnv) append(id, buyer, typ, payload string) eventlog.Commit {
	e.t.Helper()
	c, err := e.events.Append(context.Background(), eventlog.AppendRequest{AggregateType: "Order", AggregateID: id,
		ExpectedVersion: eventlog.AnyVersion, OwnerID: buyer, Events: []eventlog.Event{{Type: typ, Payload: []byte(payload)}}})
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// orders appends n orders of buyer, each placed for 100 and every second
// one shipped.
func (e *projEnv) orders(buyer string, from, n int) {
	for i := from; i < from+n; i++ {
		id := fmt.Sprintf("%s-o%d", buyer, i)
		e.append(id, buyer, "OrderPlaced", `{"total":100}`)
		if i%2 == 0 {
			e.append(id, buyer, "OrderShipped", `{}`)
		}
	}
}

func (e *projEnv) get(key string) ([]byte, bool) {
	e.t.Helper()
	var v []byte
	err := e.store.View(context.Background(), func(tx ledger.Tx) error {
		var err error
		v, err = tx.ProjectionGet(summarySub, key)
		return err
	})
	if errors.Is(err, ledger.ErrNotFound) {
		return nil, false
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return v, true
}

func (e *projEnv) summary(buyer string) orderSummary {
	e.t.Helper()
	var s orderSummary
	if v, ok := e.get("buyer/" + buyer); ok {
		if err := json.Unmarshal(v, &s); err != nil {
			e.t.Fatal(err)
		}
	}
	return s
}

// waitCaughtUp waits until the subscription has handled the whole log.
func (e *projEnv) waitCaughtUp() {
	e.t.Helper()
	projEventually(e.t, func() error { return caughtUp(e.eng.Status(context.Background(), summarySub)) })
}

// projEventually polls check every 5ms until it returns nil, and fails t
// with its last error once 15s have passed.
func projEventually(t *testing.T, check func() error) {
	t.Helper()
	checkfor.Nil(t, 15*time.Second, 5*time.Millisecond, check)
}

// caughtUp says how far behind a subscription's status is until it has
// no lag; nil then.
func caughtUp(st subscription.Status, err error) error {
	if err == nil && st.Lag != 0 {
		err = fmt.Errorf("%d events behind, checkpoint %d", st.Lag, st.Checkpoint)
	}
	return err
}

// waiting says how many calls wait for p's store until want do; nil then.
func waiting(p interface{ Waiting() int }, want int) error {
	if n := p.Waiting(); n != want {
		return fmt.Errorf("%d calls waiting for the store, want %d", n, want)
	}
	return nil
}

func wantSummaries(t *testing.T, e *projEnv, want map[string]orderSummary) {
	t.Helper()
	for buyer, w := range want {
		if got := e.summary(buyer); got != w {
			t.Errorf("summary of %s = %+v, want %+v", buyer, got, w)
		}
	}
}

// Many orders of one buyer, in every partition at once, all update one
// summary: every event counts exactly once.
func TestProjectionBuildsTheReadModel(t *testing.T) {
	t.Parallel()
	e := newProjEnv(t, 8)
	e.orders("ann", 0, 40)
	e.orders("bob", 0, 5)
	e.waitCaughtUp()
	wantSummaries(t, e, map[string]orderSummary{"ann": {40, 20, 4000}, "bob": {5, 3, 500}})
	if v, ok := e.get("order/ann-o0"); !ok || string(v) != `{"buyer":"ann","total":100,"shipped":true}` {
		t.Errorf("order/ann-o0 = %s, %v", v, ok)
	}
}

// A call that wrote and then failed applies nothing; resumed after the
// cause is fixed, the event applies once.
func TestProjectionFailedCallAppliesNothing(t *testing.T) {
	t.Parallel()
	e := newProjEnv(t, 8)
	ctx := context.Background()
	if err := e.store.Update(ctx, func(tx ledger.Tx) error {
		return tx.ProjectionPut(summarySub, "buyer/cy", []byte("not a summary"))
	}); err != nil {
		t.Fatal(err)
	}
	e.append("cy-o1", "cy", "OrderPlaced", `{"total":7}`)
	projEventually(t, func() error {
		_, err := e.eng.Parked(ctx, summarySub, "Order", "cy-o1")
		return err
	})
	if v, ok := e.get("order/cy-o1"); ok {
		t.Fatalf("the failed call's write was applied: %s", v)
	}
	if err := e.store.Update(ctx, func(tx ledger.Tx) error {
		return tx.ProjectionPut(summarySub, "buyer/cy", []byte(`{"orders":1,"total":3}`))
	}); err != nil {
		t.Fatal(err)
	}
	if err := e.eng.Resume(ctx, summarySub, "Order", "cy-o1", subscription.Caller{Actor: "test", Reason: "summary fixed"}); err != nil {
		t.Fatal(err)
	}
	projEventually(t, func() error {
		if _, ok := e.get("order/cy-o1"); !ok {
			return fmt.Errorf("cy-o1 not applied; %v", caughtUp(e.eng.Status(ctx, summarySub)))
		}
		return nil
	})
	e.waitCaughtUp()
	wantSummaries(t, e, map[string]orderSummary{"cy": {2, 0, 10}})
}

// A crash redelivers every event since the durable checkpoint: those
// applied are not applied again, and those appended meanwhile are not lost.
func TestProjectionCrashNeverAppliesTwiceNorLosesOne(t *testing.T) {
	t.Parallel()
	e := newProjEnv(t, 8)
	e.orders("ann", 0, 10)
	e.waitCaughtUp()
	wantSummaries(t, e, map[string]orderSummary{"ann": {10, 5, 1000}})
	e.crash()
	e.orders("ann", 10, 4)
	e.waitCaughtUp()
	wantSummaries(t, e, map[string]orderSummary{"ann": {14, 7, 1400}})
	e.crash() // twice, with nothing new
	e.waitCaughtUp()
	wantSummaries(t, e, map[string]orderSummary{"ann": {14, 7, 1400}})
}

// Resetting the subscription to the beginning clears the read model in
// the same step and builds it again from the log.
func TestProjectionResetRebuilds(t *testing.T) {
	t.Parallel()
	e := newProjEnv(t, 8)
	ctx := context.Background()
	e.orders("ann", 0, 6)
	e.waitCaughtUp()
	if err := e.store.Update(ctx, func(tx ledger.Tx) error {
		return tx.ProjectionPut(summarySub, "stray", []byte("from an older version"))
	}); err != nil {
		t.Fatal(err)
	}
	if err := e.eng.Reset(ctx, summarySub, 1, subscription.Caller{}); err != nil {
		t.Fatal(err)
	}
	e.waitCaughtUp()
	wantSummaries(t, e, map[string]orderSummary{"ann": {6, 3, 600}})
	if _, ok := e.get("stray"); ok {
		t.Error("a key from before the reset survived it")
	}
	e.proj.Wait()
	if err := e.store.Update(ctx, func(tx ledger.Tx) error {
		if more, err := tx.SweepProjections(0); more || err != nil {
			t.Errorf("the retired read model was not swept: %v, %v", more, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// The invoker itself: a call that finds the store busy waits for it and
// applies once it is free; one whose attempt ends while it waits applies
// nothing and fails as the attempt's end; a redelivery is skipped.
func TestProjectionInvoker(t *testing.T) {
	t.Parallel()
	e := newProjEnv(t, 1)
	inv := e.reg.InvokerOf("order-summary", 0)
	commit := eventlog.Commit{Position: 1, AggregateType: "Order", AggregateID: "dee-o1", Version: 1, OwnerID: "dee",
		Time: time.Now(), Events: []eventlog.Event{{Type: "OrderPlaced", Payload: []byte(`{"total":5}`)}}}
	d := subscription.Delivery{Subscription: summarySub, Handler: "onOrder", Attempt: 1, Commit: commit, Timeout: 10 * time.Second,
		InvocationKey: subscription.InvocationKey(summarySub, commit, 0)}
	tests := []struct {
		name      string
		busy      bool   // the store is held until the call waits for it
		endsFirst bool   // the attempt's context ends while the call waits
		wantClass string // "": success
		want      orderSummary
	}{
		{"store busy, the attempt ends first", true, true, retry.ClassCanceled, orderSummary{}},
		{"store busy, then free", true, false, "", orderSummary{1, 0, 5}},
		{"redelivered", false, false, "", orderSummary{1, 0, 5}},
	}
	for _, tc := range tests {
		ctx, cancel := context.WithCancel(context.Background())
		release := func() {}
		if tc.busy {
			release = holdStore(t, e.store)
		}
		result := make(chan *retry.Failure, 1)
		go func() { result <- inv.Invoke(ctx, d) }()
		if tc.busy {
			projEventually(t, func() error { return waiting(e.proj, 1) })
		}
		if tc.endsFirst {
			cancel()
		}
		var f *retry.Failure
		if tc.endsFirst {
			f = <-result
			release()
		} else {
			release()
			f = <-result
		}
		cancel()
		projEventually(t, func() error { return waiting(e.proj, 0) })
		switch {
		case tc.wantClass == "" && f != nil:
			t.Errorf("%s: %v", tc.name, f)
		case tc.wantClass != "" && (f == nil || f.Classes[0] != tc.wantClass):
			t.Errorf("%s: %+v, want %s", tc.name, f, tc.wantClass)
		}
		if got := e.summary("dee"); got != tc.want {
			t.Errorf("%s: summary %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// A call whose read was changed by another before it applied conflicts and
// applies nothing.
func TestProjectionConflict(t *testing.T) {
	t.Parallel()
	e := newProjEnv(t, 8)
	ctx := context.Background()
	commit := eventlog.Commit{AggregateType: "Order", AggregateID: "o", Version: 1, Events: []eventlog.Event{{Type: "X"}}}
	d := &subscription.Delivery{Commit: commit}
	tests := []struct {
		name    string
		between func(tx ledger.Tx) error // another call's write between the read and the apply
		want    error
	}{
		{"unchanged", func(ledger.Tx) error { return nil }, nil},
		{"changed", func(tx ledger.Tx) error { return tx.ProjectionPut(summarySub, "k", []byte("other")) }, registry.ErrProjectionConflict},
		{"created", func(tx ledger.Tx) error { return tx.ProjectionPut(summarySub, "absent", []byte("new")) }, registry.ErrProjectionConflict},
	}
	for _, tc := range tests {
		if err := e.store.Update(ctx, func(tx ledger.Tx) error {
			return errors.Join(tx.ProjectionPut(summarySub, "k", []byte("1")), tx.ProjectionDelete(summarySub, "absent"),
				tx.ClearProjection("none"), tx.SetApplied(summarySub, "Order", "o", 0, 0))
		}); err != nil {
			t.Fatal(err)
		}
		kv := registry.NewCallKV(ctx, e.store, summarySub)
		_, _, _ = kv.Get("k")
		_, _, _ = kv.Get("absent")
		_ = kv.Put("out", []byte(tc.name))
		if err := e.store.Update(ctx, tc.between); err != nil {
			t.Fatal(err)
		}
		if err := e.proj.Apply(ctx, summarySub, kv, d); !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
			t.Errorf("%s: apply %v, want %v", tc.name, err, tc.want)
		}
		v, _ := e.get("out")
		if applied := string(v) == tc.name; applied != (tc.want == nil) {
			t.Errorf("%s: out = %q", tc.name, v)
		}
	}
}

// A failed call's failure carries its attempt capsule, naming the deployed
// module version and the subscription; a success carries none.
func TestFailureCarriesTheAttemptCapsule(t *testing.T) {
	t.Parallel()
	e := newProjEnv(t, 1)
	ctx := context.Background()
	if err := e.store.Update(ctx, func(tx ledger.Tx) error {
		return tx.ProjectionPut(summarySub, "buyer/eve", []byte("not a summary"))
	}); err != nil {
		t.Fatal(err)
	}
	inv := e.reg.InvokerOf("order-summary", 0)
	commit := eventlog.Commit{Position: 1, AggregateType: "Order", AggregateID: "eve-o1", Version: 1, OwnerID: "eve",
		Time: time.Now(), Events: []eventlog.Event{{Type: "OrderPlaced", Payload: []byte(`{"total":5}`)}}}
	d := subscription.Delivery{Subscription: summarySub, Handler: "onOrder", Attempt: 2, Commit: commit, Timeout: 10 * time.Second,
		InvocationKey: subscription.InvocationKey(summarySub, commit, 0)}
	f := inv.Invoke(ctx, d)
	if f == nil || f.Capsule == nil {
		t.Fatalf("failure %+v: want one with a capsule", f)
	}
	c, err := abi.DecodeCapsule(f.Capsule)
	if err != nil {
		t.Fatal(err)
	}
	if c.Module.Name != "order-summary" || c.Module.Version != 1 || len(c.Module.SHA256) != 64 || c.Subscription != summarySub {
		t.Errorf("capsule names %+v, subscription %q", c.Module, c.Subscription)
	}
	if c.Event.InvocationKey != d.InvocationKey || c.Event.Attempt != 2 || c.Outcome.Kind != "failure" || c.Outcome.Message != f.Message {
		t.Errorf("capsule event %+v, outcome %+v; failure %q", c.Event, c.Outcome, f.Message)
	}
	if len(c.Calls) == 0 || c.Calls[0].Fn != abi.CallKVGet {
		t.Errorf("calls %+v: want the kv reads", c.Calls)
	}
	commit.AggregateID, commit.OwnerID = "fay-o1", "fay"
	d.Commit, d.InvocationKey = commit, subscription.InvocationKey(summarySub, commit, 0)
	if f := inv.Invoke(ctx, d); f != nil {
		t.Fatalf("a success failed: %+v", f)
	}
}
