package ledger

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// TestBuildIndexPutsResumingRecordsOnTheirPath: a store of version 3
// (resuming records on the state path, not on the 'r' path a window's
// count reads) gets them on it at Open, a few hundred a transaction: every
// window's count of resuming records is exact again, a record that
// changed before the upgrade included, and the store is marked 4.
func TestBuildIndexPutsResumingRecordsOnTheirPath(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	const n = buildBatch*3 + 17
	first := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	all := parkOrders(t, s, n, first, 3*time.Second, 5, func(j int) State {
		if j%4 == 1 {
			return StateWaiting
		}
		return StateResuming
	})
	err = rewriteStore(s, countedVersion, func(k, v []byte) ([]byte, bool, error) {
		if k[0] != kindIndex {
			return nil, false, nil
		}
		_, dim, _, _, _, err := indexKeyParts(k)
		return nil, dim == dimResumed, err
	})
	if err != nil {
		t.Fatal(err)
	}
	// An earlier host changes one: it is resuming still, from another time.
	if err := s.Update(ctx, func(tx Tx) error {
		r := all["order/o-0002"]
		r.FirstFailure = first.Add(-time.Hour)
		return tx.PutParked(r)
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
	var filters []Filter
	for _, w := range [][2]time.Duration{{-2 * time.Hour, 0}, {0, 7 * time.Second}, {90 * time.Second, 65 * time.Minute}, {-time.Hour, 5 * time.Hour}} {
		for _, st := range []State{"", StateResuming, StateWaiting} {
			filters = append(filters, Filter{FailedAfter: first.Add(w[0]), FailedBefore: first.Add(w[1]), State: st})
		}
	}
	checkCounts(t, s, filters, all)
	err = s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(indexMarkKey())
		if err != nil {
			return err
		}
		v, err := item.ValueCopy(nil)
		if err == nil && (len(v) != 1 || v[0] != indexVersion || indexVersion != 4) {
			err = fmt.Errorf("marked %v, want 4", v)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
