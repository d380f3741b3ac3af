package ledger_test

import (
	"testing"

	"github.com/berthhq/berth/ledger"
)

func TestAddHistoryBound(t *testing.T) {
	tests := []struct{ add, want int }{{1, 1}, {ledger.MaxHistory, ledger.MaxHistory}, {ledger.MaxHistory + 1, ledger.MaxHistory}, {3 * ledger.MaxHistory, ledger.MaxHistory}}
	for _, tc := range tests {
		var r ledger.Record
		for i := range tc.add {
			r.AddHistory(ledger.Entry{Attempt: i})
		}
		if len(r.History) != tc.want {
			t.Fatalf("after %d entries: %d kept, want %d", tc.add, len(r.History), tc.want)
		}
		if r.History[0].Attempt != 0 {
			t.Fatalf("after %d entries: the first entry was dropped", tc.add)
		}
		if last := r.History[len(r.History)-1].Attempt; last != tc.add-1 {
			t.Fatalf("after %d entries: the last is %d", tc.add, last)
		}
		// The kept entries are the newest, in order.
		for i := 2; i < len(r.History); i++ {
			if r.History[i].Attempt != r.History[i-1].Attempt+1 {
				t.Fatalf("after %d entries: history out of order at %d", tc.add, i)
			}
		}
	}
}
