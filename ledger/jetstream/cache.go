package jetstream

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/berthhq/berth/internal/badgerdb"
	"github.com/dgraph-io/badger/v4"
)

// The cache is a Badger database in managed mode: a transaction applied
// from stream sequence N commits at timestamp N, so the ledger as of any
// sequence is a read at that timestamp. Its own bookkeeping sits under keys
// starting with 0x00, which no ledger key does (every ledger key starts with
// its kind letter, ledger/keys.go):
//
//	0x00 "applied" -> the last stream sequence applied (8), written with it
//	0x00 "stream"  -> the identity of the stream it was built from
var (
	appliedKey  = []byte("\x00applied")
	identityKey = []byte("\x00stream")
)

// historyWindow is how far behind the stream a transaction's snapshot may
// be: one whose snapshot is more than historyWindow sequences before its
// own is aborted (and run again on a fresh one). The cache keeps every
// version of the last historyWindow sequences and lets Badger discard older
// ones, so the conflict check always has the versions it needs. It is a
// constant, not an option: every host must decide every transaction alike.
const historyWindow = 100_000

// Badger's sizes for the cache are fixed too, so that a transaction that
// fits the publishing host's Badger fits every host's when it is applied.
const (
	cacheMemTableSize   = 64 << 20
	cacheBlockCacheSize = 32 << 20
)

// openCache opens the cache in dir ("" : in memory).
func openCache(dir string, o Options) (*badgerdb.DB, error) {
	if dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("ledger/jetstream: cache: %w", err)
		}
	}
	return badgerdb.Open(badgerdb.Settings{
		Store: "ledger-cache", Dir: dir, InMemory: dir == "", Managed: true,
		MemTableSize: cacheMemTableSize, BlockCacheSize: cacheBlockCacheSize,
		Logger: o.Logger,
	})
}

// cacheState is what the cache says of itself.
type cacheState struct {
	applied  uint64
	identity string
}

func readCacheState(db *badger.DB) (cacheState, error) {
	var st cacheState
	txn := db.NewTransactionAt(math.MaxUint64, false)
	defer txn.Discard()
	if item, err := txn.Get(appliedKey); err == nil {
		v, err := item.ValueCopy(nil)
		if err != nil || len(v) != 8 {
			return st, fmt.Errorf("corrupt applied sequence (%v)", err)
		}
		st.applied = binary.BigEndian.Uint64(v)
	} else if !errors.Is(err, badger.ErrKeyNotFound) {
		return st, err
	}
	if item, err := txn.Get(identityKey); err == nil {
		v, err := item.ValueCopy(nil)
		if err != nil {
			return st, err
		}
		st.identity = string(v)
	} else if !errors.Is(err, badger.ErrKeyNotFound) {
		return st, err
	}
	if st.applied > 0 && st.identity == "" {
		return st, errors.New("applied sequence without a stream identity")
	}
	return st, nil
}

// writeIdentity marks a new cache as built from the stream of identity.
// It commits at timestamp 1, below any ledger read that could see it,
// and no ledger transaction reads it.
func writeIdentity(db *badger.DB, identity string) error {
	txn := db.NewTransactionAt(0, true)
	defer txn.Discard()
	if err := txn.Set(identityKey, []byte(identity)); err != nil {
		return err
	}
	return txn.CommitAt(1, nil)
}

// loadCache opens the cache for the stream of identity, whose last
// sequence is last, and returns it with the sequence it has applied. A
// cache that cannot be opened or read, was built from another stream (or
// one of the same name since deleted), or is ahead of the stream is
// removed and built again from nothing.
func loadCache(dir, identity string, last uint64, o Options) (*badgerdb.DB, uint64, error) {
	for attempt := 0; ; attempt++ {
		db, st, why := tryCache(dir, identity, last, o)
		if why == nil {
			return db, st.applied, nil
		}
		if db != nil {
			_ = db.Close(context.Background())
		}
		if attempt > 0 || dir == "" {
			return nil, 0, fmt.Errorf("ledger/jetstream: cache %s: %w", dir, why)
		}
		o.Logger.Warn("ledger cache rebuilt from the stream", "dir", dir, "reason", why.Error())
		if err := os.RemoveAll(dir); err != nil {
			return nil, 0, fmt.Errorf("ledger/jetstream: removing the cache %s (%v): %w", dir, why, err)
		}
	}
}

// tryCache opens the cache and checks it belongs to the stream; a non-nil
// error says why it must be rebuilt (db, if not nil, is to be closed).
func tryCache(dir, identity string, last uint64, o Options) (*badgerdb.DB, cacheState, error) {
	db, err := openCache(dir, o)
	if err != nil {
		return nil, cacheState{}, err
	}
	st, err := readCacheState(db.DB)
	switch {
	case err != nil:
		return db, st, err
	case st.identity == "":
		return db, st, writeIdentity(db.DB, identity)
	case st.identity != identity:
		return db, st, fmt.Errorf("built from stream %s, not %s", st.identity, identity)
	case st.applied > last:
		return db, st, fmt.Errorf("applied sequence %d is past the stream's last, %d", st.applied, last)
	}
	return db, st, nil
}

// cacheDir is where the cache of the stream lives under dir ("" when
// in memory): a directory of its own, so that a rebuild removes nothing
// else.
func cacheDir(dir, stream string) string {
	if dir == "" {
		return ""
	}
	return filepath.Join(dir, stream)
}
