package ledger

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// oldDueKey is a due-index key as stores written before the index was
// retired hold one per retrying record: 'd', NextRetry (Unix seconds with
// the sign bit flipped, then nanoseconds, big endian), the record's key.
func oldDueKey(next time.Time, recKey []byte) []byte {
	b := []byte{kindRetiredDue}
	b = binary.BigEndian.AppendUint64(b, uint64(next.Unix())^(1<<63))
	b = binary.BigEndian.AppendUint32(b, uint32(next.Nanosecond()))
	return append(b, recKey...)
}

// retiredDueKeys counts the keys under 'd'.
func retiredDueKeys(t *testing.T, s *Badger) int { return keysOfKind(t, s, kindRetiredDue) }

// keysOfKind counts the keys of one kind.
func keysOfKind(t *testing.T, s *Badger, kind byte) int {
	t.Helper()
	n := 0
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{kind}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// An older store keeps a due index beside its retrying records; Open
// deletes it, and the records and their counts are as they were.
func TestOpenDeletesTheRetiredDueIndex(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	opts := Options{MemTableSize: 4 << 20, BlockCacheSize: 4 << 20}
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	next := time.Date(2025, 6, 1, 12, 3, 0, 0, time.UTC)
	recs := []*Record{
		{Subscription: "sub-a", AggregateType: "Order", AggregateID: "o-1", State: StateRetrying, NextRetry: next},
		{Subscription: "sub-a", AggregateType: "Order", AggregateID: "o-2", State: StateRetrying, NextRetry: next.Add(time.Hour)},
		{Subscription: "sub-a", AggregateType: "Order", AggregateID: "o-3", State: StateWaiting},
	}
	if err := s.Update(ctx, func(tx Tx) error {
		for _, r := range recs {
			if err := tx.PutParked(r); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// What the older store's PutParked wrote beside its retrying records.
	if err := s.db.Update(func(txn *badger.Txn) error {
		for _, r := range recs[:2] {
			if err := txn.Set(oldDueKey(r.NextRetry, recordKey(r.Subscription, r.AggregateType, r.AggregateID)), nil); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n := retiredDueKeys(t, s); n != 2 {
		t.Fatalf("the old store holds %d due keys, want 2", n)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}

	s, err = Open(dir, opts)
	if err != nil {
		t.Fatalf("opening a store with a due index: %v", err)
	}
	defer s.Close(ctx)
	if n := retiredDueKeys(t, s); n != 0 {
		t.Fatalf("%d due keys left after Open, want none", n)
	}
	if err := s.View(ctx, func(tx Tx) error {
		for _, r := range recs {
			got, err := tx.Parked(r.Subscription, r.AggregateType, r.AggregateID)
			if err != nil || got.State != r.State || !got.NextRetry.Equal(r.NextRetry) {
				t.Errorf("record %s after Open: %+v, %v", r.AggregateID, got, err)
			}
		}
		c, err := tx.CountParked("sub-a")
		if err != nil || c[StateRetrying] != 2 || c[StateWaiting] != 1 || len(c) != 2 {
			t.Errorf("counts after Open: %v, %v", c, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
