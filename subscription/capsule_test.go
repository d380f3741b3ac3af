package subscription

import (
	"context"
	"errors"
	"fmt"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/retry"
)

// capsuleOf returns the capsule the ledger keeps for an aggregate of sub,
// "" when it keeps none.
func (e *env) capsuleOf(typ, id string) string {
	e.t.Helper()
	var c []byte
	err := e.store.View(context.Background(), func(tx ledger.Tx) error {
		var err error
		c, err = tx.Capsule(sub, typ, id)
		return err
	})
	if errors.Is(err, ledger.ErrNotFound) {
		return ""
	}
	if err != nil {
		e.t.Fatalf("Capsule %s/%s: %v", typ, id, err)
	}
	return string(c)
}

// The capsule of the attempt that parks an aggregate is kept beside its
// record; a failed long-horizon retry's replaces it; an operator's resume
// resolves the record and the capsule stays readable with it; a failure
// without a capsule parks without one, also when it parks again an
// aggregate that had one.
func TestParkKeepsTheAttemptsCapsule(t *testing.T) {
	var fixed, unrecorded atomic.Bool // p is fixed; r's failures are not recorded
	inv := InvokerFunc(func(_ context.Context, d Delivery) *retry.Failure {
		id := d.Commit.AggregateID
		if id == "p" && fixed.Load() {
			return nil
		}
		f := &retry.Failure{Classes: []string{"Bug"}, Message: "bad data"}
		if id == "p" || id == "r" && !unrecorded.Load() {
			f.Capsule = fmt.Appendf(nil, `{"format":"berth-capsule/1","attempt":%d}`, d.Attempt)
		}
		return f
	})
	s := brokenSpec(inv)
	s.Parked = retry.ParkedSettings{MaxRetries: 3, FirstDelay: time.Minute, Timeout: 5 * time.Second, RetryUnrecoverable: retry.SwitchOn}
	e := newEnv(t, Options{}, s)
	e.start()
	for _, id := range []string{"p", "q", "r"} {
		e.append("Order", id)
		e.waitRecord(sub, "Order", id, func(*ledger.Record) bool { return true })
	}
	if got, want := e.capsuleOf("Order", "p"), `{"format":"berth-capsule/1","attempt":1}`; got != want {
		t.Fatalf("capsule after the park: %q, want %q", got, want)
	}
	if got := e.capsuleOf("Order", "q"); got != "" {
		t.Fatalf("a failure without a capsule parked with one: %q", got)
	}

	if d := e.advance(); d != time.Minute {
		t.Fatalf("first long-horizon retry after %v", d)
	}
	for _, id := range []string{"p", "q", "r"} {
		e.waitRecord(sub, "Order", id, func(r *ledger.Record) bool { return r.ParkedRetries == 1 })
	}
	if got, want := e.capsuleOf("Order", "p"), `{"format":"berth-capsule/1","attempt":2}`; got != want {
		t.Fatalf("capsule after a failed long-horizon retry: %q, want %q", got, want)
	}
	if got := e.capsuleOf("Order", "q"); got != "" {
		t.Fatalf("a retry without a capsule left one: %q", got)
	}

	fixed.Store(true)
	if err := e.eng.Resume(context.Background(), sub, "Order", "p", Caller{Actor: "alice", Reason: "fixed"}); err != nil {
		t.Fatal(err)
	}
	checkfor.Eventually(t, func() error { return e.recordGone("Order", "p") })
	if got, want := e.capsuleOf("Order", "p"), `{"format":"berth-capsule/1","attempt":2}`; got != want {
		t.Fatalf("capsule of the resolved record: %q, want %q", got, want)
	}

	// r, resumed unfixed, parks again; its failure now unrecorded, the
	// capsule of the earlier one goes.
	if got := e.capsuleOf("Order", "r"); got == "" {
		t.Fatal("r has no capsule before its resume")
	}
	unrecorded.Store(true)
	if err := e.eng.Resume(context.Background(), sub, "Order", "r", Caller{Actor: "alice", Reason: "try again"}); err != nil {
		t.Fatal(err)
	}
	e.waitRecord(sub, "Order", "r", func(r *ledger.Record) bool {
		return r.State != ledger.StateResuming && r.History[len(r.History)-1].Action == "parked"
	})
	if got := e.capsuleOf("Order", "r"); got != "" {
		t.Fatalf("an unrecorded failure parked again with the earlier capsule %q", got)
	}
}

// A capsule too big for the ledger (past ledger.MaxCapsuleSize; on
// JetStream, also one that makes the transaction pass the server's
// max_payload) does not hold the park: the record is kept without it.
func TestCapsuleTooBigParksWithoutIt(t *testing.T) {
	huge := make([]byte, ledger.MaxCapsuleSize+1)
	inv := InvokerFunc(func(context.Context, Delivery) *retry.Failure {
		return &retry.Failure{Classes: []string{"Bug"}, Message: "bad data", Capsule: huge}
	})
	e := newEnv(t, Options{}, brokenSpec(inv))
	e.start()
	e.append("Order", "p")
	if r := e.waitRecord(sub, "Order", "p", func(*ledger.Record) bool { return true }); r.Error.Message != "bad data" {
		t.Fatalf("record %+v", r)
	}
	if got := e.capsuleOf("Order", "p"); got != "" {
		t.Fatalf("a capsule too big to keep was kept (%d bytes)", len(got))
	}
}
