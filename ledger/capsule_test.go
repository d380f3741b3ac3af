package ledger

import (
	"errors"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// TestCapsuleKeysGoWithTheirRecords: the bytes of a capsule leave the
// live key when its record is resolved, and the store when the retention
// sweeps the record (the contract suite sees only that Capsule stops
// finding them); a capsule left under a record's key by a host that did
// not know capsules is not taken for the next record's.
func TestCapsuleKeysGoWithTheirRecords(t *testing.T) {
	s, err := Open("", Options{InMemory: true, MemTableSize: 4 << 20, BlockCacheSize: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(t.Context())
	at := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	rec := func() *Record {
		return &Record{Subscription: "sub-a", AggregateType: "Order", AggregateID: "o-1", State: StateWaiting,
			History: []Entry{{Time: at, Action: "parked"}}}
	}
	update := func(fn func(tx Tx) error) {
		t.Helper()
		if err := s.Update(t.Context(), fn); err != nil {
			t.Fatal(err)
		}
	}
	counts := func(live, resolved int) {
		t.Helper()
		if e, v := keysOfKind(t, s, kindCapsule), keysOfKind(t, s, kindResolvedCapsule); e != live || v != resolved {
			t.Fatalf("%d live and %d resolved capsule keys, want %d and %d", e, v, live, resolved)
		}
	}
	update(func(tx Tx) error {
		return errors.Join(tx.PutParked(rec()), tx.PutCapsule("sub-a", "Order", "o-1", []byte("capsule")))
	})
	counts(1, 0)
	update(func(tx Tx) error { return tx.DeleteParked("sub-a", "Order", "o-1") })
	counts(0, 1)
	update(func(tx Tx) error {
		_, err := tx.SweepResolved(at.Add(time.Second), 0)
		return err
	})
	counts(0, 0)

	// What an older host's DeleteParked left: the record gone, its capsule not.
	if err := s.db.Update(func(txn *badger.Txn) error {
		return txn.Set(capsuleKey("sub-a", "Order", "o-1"), []byte("stale"))
	}); err != nil {
		t.Fatal(err)
	}
	update(func(tx Tx) error { return tx.PutParked(rec()) })
	counts(0, 0)
	if err := s.View(t.Context(), func(tx Tx) error {
		_, err := tx.Capsule("sub-a", "Order", "o-1")
		return err
	}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Capsule of a record parked over a stale capsule: %v, want ErrNotFound", err)
	}
}
