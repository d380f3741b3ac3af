package ledger

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// TestCapsuleKeysGoWithTheirRecords: a capsule stays under its key when
// its record is resolved (no bytes written again), moves to the resolved
// record's key when the aggregate parks again, and leaves the store when
// the retention sweeps the record (the contract suite sees only that
// Capsule stops finding them); a capsule an earlier host moved at the
// resolution is still found; one left under a record's key by a host that
// kept no resolved records is not taken for the next record's.
func TestCapsuleKeysGoWithTheirRecords(t *testing.T) {
	s, err := Open("", Options{InMemory: true, MemTableSize: 4 << 20, BlockCacheSize: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(t.Context())
	at := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	rec := func() *Record {
		at = at.Add(time.Minute)
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
	capsule := func(want string) {
		t.Helper()
		err := s.View(t.Context(), func(tx Tx) error {
			got, err := tx.Capsule("sub-a", "Order", "o-1")
			if want == "" && errors.Is(err, ErrNotFound) {
				return nil
			}
			if err != nil || string(got) != want {
				return fmt.Errorf("Capsule = %q, %v; want %q", got, err, want)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	sweep := func() {
		update(func(tx Tx) error {
			_, err := tx.SweepResolved(at.Add(time.Hour), 0)
			return err
		})
	}
	park := func(c string) {
		update(func(tx Tx) error {
			return errors.Join(tx.PutParked(rec()), tx.PutCapsule("sub-a", "Order", "o-1", []byte(c)))
		})
	}
	resolve := func() { update(func(tx Tx) error { return tx.DeleteParked("sub-a", "Order", "o-1") }) }
	park("first")
	counts(1, 0)
	resolve()
	counts(1, 0)
	capsule("first")
	park("second") // the first moves to its resolved record
	counts(1, 1)
	capsule("second")
	resolve()
	capsule("second")
	sweep()
	counts(0, 0)
	capsule("")

	// What an earlier host's DeleteParked left: the capsule under 'v'.
	park("third")
	update(func(tx Tx) error { return tx.DeleteParked("sub-a", "Order", "o-1") })
	if err := s.db.Update(func(txn *badger.Txn) error {
		ck := capsuleKey("sub-a", "Order", "o-1")
		hk := resolvedKey("sub-a", "Order", "o-1", 3)
		return errors.Join(txn.Delete(ck), txn.Set(resolvedCapsuleKey(hk), []byte("third")))
	}); err != nil {
		t.Fatal(err)
	}
	counts(0, 1)
	capsule("third")
	sweep()
	counts(0, 0)

	// What a host without resolved records left: the record gone, its capsule not.
	if err := s.db.Update(func(txn *badger.Txn) error {
		return txn.Set(capsuleKey("sub-a", "Order", "o-1"), []byte("stale"))
	}); err != nil {
		t.Fatal(err)
	}
	update(func(tx Tx) error { return tx.PutParked(rec()) })
	counts(0, 0)
	capsule("")
}
