package jobs_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/jobs"
	"github.com/berthhq/berth/ledger"
)

// TestJobActsInBatches: at 1,000 records a second a job acts on 100
// records at once (a tenth of a second's worth), all of them, each once.
func TestJobActsInBatches(t *testing.T) {
	e := newEnv(t)
	e.park("A.h", 150, "X")
	ctx := context.Background()
	r := e.open()
	j, err := r.Create(ctx, jobs.Spec{Action: ledger.JobResume, Rate: 1000, Actor: "ops", Reason: "fixed"})
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < 150; n = len(e.eng.called()) {
		e.waitCalls(n + 1)
		e.clock.Advance(100 * time.Millisecond) // the next batch's pace
	}
	done, err := r.Wait(ctx, j.ID)
	if err != nil || done.Done != 150 || done.InFlight != nil {
		t.Fatalf("%+v, %v: want 150 done, nothing in flight", done, err)
	}
	calls := e.eng.called()
	if len(calls) != 150 || len(slices.Compact(slices.Sorted(slices.Values(calls)))) != 150 {
		t.Errorf("%d calls, want 150 different ones", len(calls))
	}
}

// TestJobWritesItsProgressBeforeItWaits: the progress of a batch is written
// with the next batch's start, or before the job waits for its rate: a job
// waiting shows every record it acted on, none in flight.
func TestJobWritesItsProgressBeforeItWaits(t *testing.T) {
	e := newEnv(t)
	e.park("A.h", 300, "X")
	ctx := context.Background()
	r := e.open()
	j, err := r.Create(ctx, jobs.Spec{Action: ledger.JobResume, Rate: 1000, Actor: "ops", Reason: "fixed"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []int{100, 200} {
		e.waitCalls(want)
		// The clock stands still, so the job waits for its next batch's pace.
		checkfor.Nil(t, 10*time.Second, 10*time.Millisecond, func() error {
			got, err := r.Get(ctx, j.ID)
			if err != nil {
				return err
			}
			if got.Done != want || got.InFlight != nil {
				return fmt.Errorf("stored: %d done, %d in flight; want %d done, none in flight", got.Done, len(got.InFlight), want)
			}
			return nil
		})
		e.clock.Advance(100 * time.Millisecond)
	}
	if done, err := r.Wait(ctx, j.ID); err != nil || done.Done != 300 {
		t.Fatalf("%+v, %v: want 300 done", done, err)
	}
}

// TestJobSettlesABatchInFlight: a job stopped in the middle of a batch,
// as written by a host that crashed (and one written before batches, with
// one record in flight), counts what was done once and acts on the rest.
func TestJobSettlesABatchInFlight(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		e := newEnv(t)
		e.park("A.h", 4, "X")
		ctx := context.Background()
		j := &ledger.Job{Action: ledger.JobResume, Actor: "ops", Reason: "r", Rate: 1000, State: ledger.JobRunning,
			Created: e.clock.Now(), Updated: e.clock.Now(), Matched: 4}
		err := e.store.Update(ctx, func(tx ledger.Tx) error {
			if err := tx.CreateJob(j); err != nil {
				return err
			}
			// A-00 was resolved by the crashed batch, A-01 not yet.
			if err := tx.DeleteParked("A.h", "Order", "A-00"); err != nil {
				return err
			}
			item := func(id string) ledger.JobItem {
				return ledger.JobItem{Subscription: "A.h", AggregateType: "Order", AggregateID: id}
			}
			if legacy {
				j.InFlightOne = &[]ledger.JobItem{item("A-01")}[0]
				j.Cursor.After = ledger.Cursor("A.h", "Order", "A-00")
				j.Done = 1
			} else {
				j.InFlight = []ledger.JobItem{item("A-00"), item("A-01")}
			}
			return tx.PutJob(j)
		})
		if err != nil {
			t.Fatal(err)
		}
		r := e.open()
		done, err := r.Wait(ctx, j.ID)
		if err != nil || done.Done != 4 || done.InFlight != nil || done.InFlightOne != nil {
			t.Fatalf("legacy %v: %+v, %v; want 4 done, nothing in flight", legacy, done, err)
		}
		// A batch's actions run at once, in any order.
		if got := e.eng.called(); !slices.Equal(slices.Sorted(slices.Values(got)), []string{"resume A-01", "resume A-02", "resume A-03"}) {
			t.Errorf("legacy %v: calls %v, want A-01 once, then A-02, A-03", legacy, got)
		}
	}
}
