package badgerdb

import (
	"fmt"
	"log/slog"

	"github.com/dgraph-io/badger/v4"
)

// Settings are a store's resolved Badger settings (its package applies its
// own defaults first).
type Settings struct {
	Store          string // "eventlog", "ledger": tags log lines and errors
	Dir            string // ignored when InMemory
	SyncWrites     bool
	InMemory       bool
	MemTableSize   int64
	BlockCacheSize int64
	Logger         *slog.Logger // nil: Badger is silent
}

// Open opens (creating if needed) a Badger database with s.
func Open(s Settings) (*badger.DB, error) {
	bo := badger.DefaultOptions(s.Dir).
		WithSyncWrites(s.SyncWrites).
		WithInMemory(s.InMemory).
		WithMemTableSize(s.MemTableSize).
		// Values up to this size live in the LSM tree, larger ones in the
		// value log; Badger wants it below its largest batch.
		WithValueThreshold(min(1<<20, s.MemTableSize/16)).
		WithBlockCacheSize(s.BlockCacheSize).
		WithLogger(nil)
	if s.InMemory {
		bo = bo.WithDir("").WithValueDir("")
	}
	if s.Logger != nil {
		bo = bo.WithLogger(Logger{L: s.Logger, Store: s.Store})
	}
	db, err := badger.Open(bo)
	if err != nil {
		return nil, fmt.Errorf("%s: open %s: %w", s.Store, s.Dir, err)
	}
	return db, nil
}
