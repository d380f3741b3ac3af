package subscription

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/retry"
)

// A start does not wait for its parked aggregates to be held: Start
// returns, and the run holds them from the ledger's index beside it. An
// operator's resume made at once waits for the hold (else the hold would
// park the aggregate again after its resume), events of held aggregates
// appended before the start are not delivered, and the resumed aggregate
// rejoins live delivery.
func TestStartHoldsParkedBesideTheStart(t *testing.T) {
	const others = 20_000
	var broken atomic.Bool
	broken.Store(true)
	rec := newRecorder(nil, func(d Delivery, n int) *retry.Failure {
		if broken.Load() && d.Commit.AggregateID == "z" {
			return &retry.Failure{Classes: []string{"Bug"}, Message: "bad data"}
		}
		return nil
	})
	e := newEnv(t, Options{Partitions: 4}, waitingSpec(rec))
	rec.clock = e.clock
	e.start()
	e.append("Order", "z")
	e.waitRecord(sub, "Order", "z", func(r *ledger.Record) bool { return r.State == ledger.StateWaiting })
	if err := e.eng.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.eng = nil
	// Parked by an earlier run, in key order before "z".
	for from := 0; from < others; from += 1000 {
		if err := parkWaiting(e.store, from, from+1000); err != nil {
			t.Fatal(err)
		}
	}
	e.append("Order", "z")       // held: delivered by the resume
	e.append("Order", "a-00007") // held: never delivered here
	broken.Store(false)

	eng, err := Open(e.eventLog(), e.store, Options{Partitions: 4, Clock: e.clock}, e.specs...)
	if err != nil {
		t.Fatal(err)
	}
	e.eng = eng
	if err := eng.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := eng.Resume(context.Background(), sub, "Order", "z", Caller{Actor: "ops", Reason: "fixed"}); err != nil {
		t.Fatal(err)
	}
	rec.waitHandled(t, "z", 2)
	checkfor.Eventually(t, func() error { return e.recordGone("Order", "z") })
	last := e.append("Order", "z")
	rec.waitHandled(t, "z", 3)
	checkfor.Eventually(t, func() error { return e.checkpointAt(sub, last.Position+1) })
	if calls := rec.of("a-00007"); len(calls) != 0 {
		t.Fatalf("a held aggregate's event was delivered: %+v", calls)
	}
	st := e.status(sub)
	held := 0
	for _, p := range st.Partitions {
		if p.State != StateRunning {
			t.Errorf("partition %d is %s once its parked are held", p.Index, p.State)
		}
		held += p.Held
	}
	if held != others {
		t.Fatalf("partitions hold %d aggregates, want %d", held, others)
	}
}

// waitingSpec parks a "Bug" at once and leaves it waiting for an operator.
func waitingSpec(inv Invoker) Spec {
	s := spec(sub, inv)
	s.HandlerRetry = retry.Settings{Unrecoverable: []string{"Bug"}}
	return s
}

// parkWaiting parks aggregates a-from..a-(to-1), waiting for an operator,
// in one transaction.
func parkWaiting(store ledger.Store, from, to int) error {
	return store.Update(context.Background(), func(tx ledger.Tx) error {
		for i := from; i < to; i++ {
			r := &ledger.Record{Subscription: sub, AggregateType: "Order", AggregateID: fmt.Sprintf("a-%05d", i),
				Version: 1, Position: 1, Attempts: 1, FirstFailure: t0, LastFailure: t0,
				State: ledger.StateWaiting, WaitReason: ledger.WaitUnrecoverable,
				Error: ledger.ErrorInfo{Classes: []string{"Bug"}, Message: "bad data", Kind: "unrecoverable"}}
			if err := tx.PutParked(r); err != nil {
				return err
			}
		}
		return nil
	})
}
