// Package ledgertest is the contract test suite of ledger.Store: every
// implementation (ledger's Badger and ledger/jetstream) runs it to show it
// behaves the same.
package ledgertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/berthhq/berth/ledger"
)

// Opener opens the ledger kept at name. The suite passes a fresh
// t.TempDir() for each test; opening the same name again after Close must
// give back the same ledger, with everything in it. A backend that keeps no
// files may use name as the name of its bucket. The suite closes every store
// it opens.
type Opener func(t *testing.T, name string) ledger.Store

// Run runs the whole contract suite against the stores open returns.
func Run(t *testing.T, open Opener) {
	tests := []struct {
		name string
		fn   func(t *testing.T, open Opener)
	}{
		{"Checkpoint", testCheckpoint},
		{"PartitionCheckpoint", testPartitionCheckpoint},
		{"PartitionOwner", testPartitionOwner},
		{"DutyHolder", testDutyHolder},
		{"Meta", testMeta},
		{"Rollback", testRollback},
		{"ViewIsReadOnly", testViewReadOnly},
		{"Parked", testParked},
		{"ParkedNamesDoNotCollide", testParkedNames},
		{"PutParkedInvalid", testPutParkedInvalid},
		{"ListParkedFilters", testListFilters},
		{"ListParkedPaging", testListPaging},
		{"ListParkedByFailure", testListByFailure},
		{"IndexAgreesWithEveryFilter", testIndexAgrees},
		{"CountersExact", testCounters},
		{"ReadsAfterEachChange", testReadsAfterEachChange},
		{"FailureGroups", testGroups},
		{"Jobs", testJobs},
		{"Audit", testAudit},
		{"Resolved", testResolved},
		{"CountParked", testCount},
		{"History", testHistory},
		{"Notifications", testNotifications},
		{"Reopen", testReopen},
		{"Closed", testClosed},
		{"ConcurrentUpdates", testConcurrentUpdates},
		{"CanceledContext", testCanceled},
	}
	tests = append(tests, projectionTests...)
	tests = append(tests, capsuleTests...)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, open)
		})
	}
}

func openNew(t *testing.T, open Opener) ledger.Store {
	t.Helper()
	return openAt(t, open, t.TempDir())
}

func openAt(t *testing.T, open Opener, name string) ledger.Store {
	t.Helper()
	s := open(t, name)
	t.Cleanup(func() {
		if err := s.Close(context.Background()); err != nil && !errors.Is(err, ledger.ErrClosed) {
			t.Errorf("close: %v", err)
		}
	})
	return s
}

func update(t *testing.T, s ledger.Store, fn func(tx ledger.Tx) error) {
	t.Helper()
	if err := s.Update(context.Background(), fn); err != nil {
		t.Fatalf("update: %v", err)
	}
}

func view(t *testing.T, s ledger.Store, fn func(tx ledger.Tx) error) {
	t.Helper()
	if err := s.View(context.Background(), fn); err != nil {
		t.Fatalf("view: %v", err)
	}
}

// base is the time the suite's records are built around.
func base() time.Time { return time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC) }

// rec builds a record; a retrying one is due at base()+dueIn.
func rec(sub, aggType, id string, state ledger.State, dueIn time.Duration) *ledger.Record {
	r := &ledger.Record{
		Subscription: sub, AggregateType: aggType, AggregateID: id,
		Version: 7, Index: 1, Position: 42,
		Error:    ledger.ErrorInfo{Classes: []string{"java.lang.IllegalStateException"}, Message: "mail service down", Kind: "recoverable"},
		Attempts: 5, ParkedRetries: 2,
		FirstFailure: base().Add(-time.Hour), LastFailure: base().Add(-time.Minute),
		State: state,
		History: []ledger.Entry{{Time: base().Add(-time.Hour), Action: "parked", Attempt: 5, Version: 7,
			Error: &ledger.ErrorInfo{Message: "mail service down", Kind: "recoverable"}}},
	}
	if state == ledger.StateRetrying {
		r.NextRetry = base().Add(dueIn)
	}
	return r
}

func put(t *testing.T, s ledger.Store, rs ...*ledger.Record) {
	t.Helper()
	update(t, s, func(tx ledger.Tx) error {
		for _, r := range rs {
			if err := tx.PutParked(r); err != nil {
				return err
			}
		}
		return nil
	})
}

// sameRecord reports how a and b differ, "" if they do not (times compared
// as instants).
func sameRecord(a, b *ledger.Record) string {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		return fmt.Sprintf("\n got %s\nwant %s", ja, jb)
	}
	return ""
}

func ids(rs []*ledger.Record) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Subscription + "/" + r.AggregateType + "/" + r.AggregateID
	}
	return out
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
