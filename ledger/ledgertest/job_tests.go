package ledgertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/berthhq/berth/ledger"
)

func job(action string) *ledger.Job {
	return &ledger.Job{Action: action, Filter: ledger.JobFilter{Subscriptions: []string{"sub-a"}, Class: "Downstream"},
		Actor: "ops", Reason: "outage over", Rate: 50, State: ledger.JobRunning, Created: base(), Updated: base(), Matched: 3}
}

// testJobs: jobs get increasing ids that survive a reopen, read back as
// written, update in place, list in id order, and bad ones are refused.
func testJobs(t *testing.T, open Opener) {
	dir := t.TempDir()
	s := openAt(t, open, dir)
	a, b := job(ledger.JobResume), job(ledger.JobSkip)
	update(t, s, func(tx ledger.Tx) error {
		if err := tx.CreateJob(a); err != nil {
			return err
		}
		return tx.CreateJob(b)
	})
	if a.ID != 1 || b.ID != 2 {
		t.Fatalf("ids %d, %d; want 1, 2", a.ID, b.ID)
	}
	a.Done, a.Cursor = 2, ledger.JobCursor{Subscription: 0, After: "cursor"}
	a.AddFailure(ledger.JobFailure{Time: base(), Subscription: "sub-a", AggregateType: "order", AggregateID: "o-1", Error: "busy"})
	a.State, a.Finished = ledger.JobDone, base().Add(time.Minute)
	update(t, s, func(tx ledger.Tx) error { return tx.PutJob(a) })
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, open, dir)
	c := job(ledger.JobResume)
	update(t, s, func(tx ledger.Tx) error { return tx.CreateJob(c) })
	if c.ID != 3 {
		t.Errorf("the id after a reopen is %d, want 3", c.ID)
	}
	view(t, s, func(tx ledger.Tx) error {
		got, err := tx.Job(1)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != ledger.JobDone || got.Done != 2 || got.Failed != 1 || len(got.Failures) != 1 || got.Failures[0].AggregateID != "o-1" ||
			got.Cursor.After != "cursor" || !got.Finished.Equal(base().Add(time.Minute)) || got.Filter.Class != "Downstream" ||
			len(got.Filter.Subscriptions) != 1 || got.Actor != "ops" || got.Reason != "outage over" || got.Rate != 50 {
			t.Errorf("job 1 read back as %+v", got)
		}
		if _, err := tx.Job(9); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("Job(9): %v, want ErrNotFound", err)
		}
		all, err := tx.ListJobs(0, 0)
		if err != nil || len(all) != 3 || all[0].ID != 1 || all[2].ID != 3 {
			t.Errorf("ListJobs(0) = %d jobs, %v", len(all), err)
		}
		if page, _ := tx.ListJobs(1, 1); len(page) != 1 || page[0].ID != 2 {
			t.Errorf("ListJobs(1, 1) = %+v", page)
		}
		if page, _ := tx.ListJobs(3, 0); len(page) != 0 {
			t.Errorf("ListJobs(3) = %d jobs", len(page))
		}
		return nil
	})
	for name, bad := range map[string]func(tx ledger.Tx) error{
		"unknown action": func(tx ledger.Tx) error { j := job("replay"); return tx.CreateJob(j) },
		"no rate":        func(tx ledger.Tx) error { j := job(ledger.JobResume); j.Rate = 0; return tx.CreateJob(j) },
		"bad state":      func(tx ledger.Tx) error { j := job(ledger.JobResume); j.State = "paused"; return tx.CreateJob(j) },
	} {
		if err := s.Update(context.Background(), bad); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	err := s.Update(context.Background(), func(tx ledger.Tx) error { j := job(ledger.JobResume); j.ID = 77; return tx.PutJob(j) })
	if !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("PutJob of a job never created: %v, want ErrNotFound", err)
	}
}
