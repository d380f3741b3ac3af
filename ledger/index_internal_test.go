package ledger

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// TestBuildIndexOnAnOlderStore: a store whose records were written before
// the index (no entries, no counters per class, no mark) is indexed by
// Open, in batches, and its listings, counts and oldest agree with its
// records; a record changed before it is indexed keeps its counts right.
func TestBuildIndexOnAnOlderStore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	const n = buildBatch*2 + 37
	first := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < n; i += 200 {
		err := s.Update(ctx, func(tx Tx) error {
			for j := i; j < min(i+200, n); j++ {
				r := &Record{Subscription: "sub", AggregateType: "order", AggregateID: fmt.Sprintf("o-%04d", j),
					State: StateWaiting, FirstFailure: first.Add(time.Duration(j) * time.Second),
					Error: ErrorInfo{Classes: []string{"Timeout", "Downstream"}, Message: "deadline"}}
				if j%3 == 0 {
					r.Error.Classes = []string{"NullPointer"}
				}
				if err := tx.PutParked(r); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// Make it an older store: drop the index, its counters and its mark.
	for _, p := range [][]byte{{kindIndex}, {kindTally}, indexMarkKey()} {
		if err := s.db.DropPrefix(p); err != nil {
			t.Fatal(err)
		}
	}
	// A record changed and one resolved before the index is built.
	if err := s.Update(ctx, func(tx Tx) error {
		r, err := tx.Parked("sub", "order", "o-0001")
		if err != nil {
			return err
		}
		r.State = StateRetrying
		if err := tx.PutParked(r); err != nil {
			return err
		}
		return tx.DeleteParked("sub", "order", "o-0002")
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(dir, Options{}); err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	err = s.View(ctx, func(tx Tx) error {
		null := n/3 + 1 // o-0000, o-0003, …
		for f, want := range map[string]int{"NullPointer": null, "Downstream": n - null - 1, "Nobody": 0} {
			c, err := tx.CountMatching(Filter{Class: f})
			if err != nil || c != want {
				t.Errorf("CountMatching(class %s) = %d, %v; want %d", f, c, err, want)
			}
			listed := 0
			g := Filter{Class: f, Limit: 300}
			for {
				page, next, err := tx.ListParked(g)
				if err != nil {
					t.Fatal(err)
				}
				listed += len(page)
				if next == "" {
					break
				}
				g.After = next
			}
			if listed != want {
				t.Errorf("ListParked(class %s) listed %d, want %d", f, listed, want)
			}
		}
		if c, err := tx.CountMatching(Filter{State: StateRetrying}); err != nil || c != 1 {
			t.Errorf("retrying: %d, %v; want 1", c, err)
		}
		if o, ok, err := tx.OldestParked("sub"); err != nil || !ok || !o.Equal(first) {
			t.Errorf("OldestParked = %v, %v, %v; want %v", o, ok, err, first)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = s.db.View(func(txn *badger.Txn) error {
		_, err := txn.Get(indexMarkKey())
		return err
	})
	if err != nil {
		t.Fatalf("the store is not marked indexed: %v", err)
	}
}
