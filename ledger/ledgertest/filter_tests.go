package ledgertest

import (
	"slices"
	"testing"
	"time"

	"github.com/berthhq/berth/ledger"
)

// testListByFailure: the parked list filters by error class (a class
// matches the records below it, whose chain holds it), by message text
// (ignoring case) and by first-failure time, alone and together.
func testListByFailure(t *testing.T, open Opener) {
	s := openNew(t, open)
	mk := func(id string, classes []string, msg string, firstAgo time.Duration) *ledger.Record {
		r := rec("sub-a", "order", id, ledger.StateWaiting, 0)
		r.Error = ledger.ErrorInfo{Classes: classes, Message: msg, Kind: "recoverable"}
		r.FirstFailure = base().Add(-firstAgo)
		return r
	}
	put(t, s,
		mk("refused-1", []string{"ConnectionRefused", "Downstream"}, "dial tcp 10.0.0.7:443: connection refused", 3*time.Hour),
		mk("refused-2", []string{"ConnectionRefused", "Downstream"}, "dial tcp 10.0.0.8:443: Connection Refused", time.Hour),
		mk("timeout-1", []string{"Timeout", "Downstream"}, "deadline exceeded after 5s", 2*time.Hour),
		mk("bug-1", []string{"NullPointer"}, "nil map write in handler", 30*time.Minute),
		mk("none-1", nil, "connection refused by peer", 10*time.Minute),
	)
	at := func(ago time.Duration) time.Time { return base().Add(-ago) }
	for _, tc := range []struct {
		name string
		f    ledger.Filter
		want []string
	}{
		{"a class", ledger.Filter{Class: "ConnectionRefused"}, []string{"refused-1", "refused-2"}},
		{"a parent class takes its descendants", ledger.Filter{Class: "Downstream"}, []string{"refused-1", "refused-2", "timeout-1"}},
		{"a class nobody has", ledger.Filter{Class: "Down"}, nil},
		{"message, any case", ledger.Filter{Message: "CONNECTION refused"}, []string{"none-1", "refused-1", "refused-2"}},
		{"message and class", ledger.Filter{Message: "connection refused", Class: "Downstream"}, []string{"refused-1", "refused-2"}},
		{"failed after", ledger.Filter{FailedAfter: at(time.Hour)}, []string{"bug-1", "none-1", "refused-2"}},
		{"failed before", ledger.Filter{FailedBefore: at(time.Hour)}, []string{"refused-1", "timeout-1"}},
		{"a window", ledger.Filter{FailedAfter: at(2 * time.Hour), FailedBefore: at(30 * time.Minute)}, []string{"refused-2", "timeout-1"}},
		{"a window and a class", ledger.Filter{FailedAfter: at(4 * time.Hour), FailedBefore: at(90 * time.Minute), Class: "Downstream"},
			[]string{"refused-1", "timeout-1"}},
		{"another subscription", ledger.Filter{Subscription: "sub-b", Class: "Downstream"}, nil},
	} {
		for _, keyOrder := range []bool{false, true} {
			view(t, s, func(tx ledger.Tx) error {
				var got []string
				f := tc.f
				f.Limit, f.KeyOrder = 2, keyOrder // page through, so filtered pages join up
				for {
					page, next, err := tx.ListParked(f)
					if err != nil {
						t.Fatalf("%s: ListParked: %v", tc.name, err)
					}
					for _, r := range page {
						got = append(got, r.AggregateID)
					}
					if next == "" {
						break
					}
					if last := page[len(page)-1]; keyOrder && next != ledger.Cursor(last.Subscription, last.AggregateType, last.AggregateID) {
						t.Errorf("%s: in key order, the next cursor is not ledger.Cursor of the page's last record", tc.name)
					}
					f.After = next
				}
				if keyOrder && !slices.IsSorted(got) {
					t.Errorf("%s: in key order, got %v", tc.name, got)
				}
				slices.Sort(got)
				if !slices.Equal(got, tc.want) {
					t.Errorf("%s (key order %v): got %v, want %v", tc.name, keyOrder, got, tc.want)
				}
				return nil
			})
		}
	}
}
