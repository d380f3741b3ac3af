package jobs_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/berthhq/berth/jobs"
	"github.com/berthhq/berth/ledger"
)

// A job that reaches its end and one an operator cancels each queue one
// "job-finished" notification, in the transaction that ends them: how it
// ended, by whom, its counts, and its subscription when its filter names
// one only.
func TestJobFinishedIsNotified(t *testing.T) {
	e := newEnv(t)
	e.park("A.h", 2, "X")
	e.park("B.h", 3, "X")
	ctx := context.Background()
	r := e.open()
	done, err := r.Create(ctx, jobs.Spec{Action: ledger.JobResume, Rate: 1000, Actor: "ops", Reason: "over",
		Filter: ledger.JobFilter{Subscriptions: []string{"A.h"}}})
	if err != nil {
		t.Fatal(err)
	}
	// At 1,000 a second, both in one batch, unpaced.
	if _, err := r.Wait(ctx, done.ID); err != nil {
		t.Fatal(err)
	}
	slow, err := r.Create(ctx, jobs.Spec{Action: ledger.JobSkip, Rate: 1})
	if err != nil {
		t.Fatal(err)
	}
	e.waitCalls(3)
	if _, err := r.Cancel(ctx, slow.ID, "admin"); err != nil {
		t.Fatal(err)
	}
	var ns []ledger.Notification
	if err := e.store.View(ctx, func(tx ledger.Tx) (err error) {
		ns, err = tx.Notifications(0, 100)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	ns = slices.DeleteFunc(ns, func(n ledger.Notification) bool { return n.Group != "" }) // the parks' groups opened
	if len(ns) != 2 {
		t.Fatalf("notifications %+v, want 2", ns)
	}
	for i, want := range []ledger.Notification{
		{Type: ledger.NotifyJobFinished, Job: "1", JobState: "done", Actor: "ops", Subscription: "A.h",
			Reason: "resume: 2 done, 0 failed, 0 no longer parked, of 2 matched"},
		{Type: ledger.NotifyJobFinished, Job: "2", JobState: "cancelled", Actor: "admin",
			Reason: "skip: 1 done, 0 failed, 0 no longer parked, of 3 matched"},
	} {
		got := ns[i]
		if got.Time.IsZero() {
			t.Errorf("notification %d has no time", i)
		}
		got.Seq, got.Time = 0, time.Time{}
		if got.Type != want.Type || got.Job != want.Job || got.JobState != want.JobState || got.Actor != want.Actor ||
			got.Subscription != want.Subscription || got.Reason != want.Reason {
			t.Errorf("notification %d = %+v\nwant %+v", i, got, want)
		}
	}
}
