package jetstream

import (
	"context"
	"errors"
	"math"

	"github.com/dgraph-io/badger/v4"
)

// LayoutKey is the cache's key of its layout, for tests that age or
// advance a cache.
var LayoutKey = layoutKey

// EditCache runs fn on the closed cache of o in one transaction that
// commits at the sequence the cache has applied (so that what it writes is
// the newest version).
func EditCache(o Options, fn func(txn *badger.Txn) error) error {
	o, err := o.resolved()
	if err != nil {
		return err
	}
	db, err := openCache(cacheDir(o.Dir, o.Stream), o)
	if err != nil {
		return err
	}
	st, err := readCacheState(db.DB)
	if err == nil {
		txn := db.NewTransactionAt(math.MaxUint64, true)
		defer txn.Discard()
		if err = fn(txn); err == nil {
			err = txn.CommitAt(max(st.applied, 1), nil)
		}
	}
	return errors.Join(err, db.Close(context.Background()))
}

// ReadCache returns the newest value of key in the closed cache of o (nil
// when it has none).
func ReadCache(o Options, key []byte) ([]byte, error) {
	var v []byte
	err := EditCache(o, func(txn *badger.Txn) error {
		item, err := txn.Get(key)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		v, err = item.ValueCopy(nil)
		return err
	})
	return v, err
}

// Compact compacts the stream now, due or not (as the host that publishes
// the compaction point).
func (s *Store) Compact(ctx context.Context) error { return s.compact(ctx, true) }

// HoldApply stops the store applying the stream (as a host cut off from
// NATS would) until the returned func is called.
func (s *Store) HoldApply() (release func()) {
	s.applyMu.Lock()
	return s.applyMu.Unlock
}

// LimitRecent bounds what s keeps in memory of the last transactions'
// writes (recentWrites) to n bytes: 1 keeps none, and the cache's Badger
// answers for every sequence applied before the last.
func (s *Store) LimitRecent(n int) {
	s.recent.mu.Lock()
	defer s.recent.mu.Unlock()
	s.recent.limit = n
}
