package ledger

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/berthhq/berth/internal/badgerdb"
	"github.com/berthhq/berth/internal/diskspace"
	"github.com/berthhq/berth/ledger/internal/kvtx"
	"github.com/dgraph-io/badger/v4"
)

// Badger is the embedded Store, kept in a Badger database under one
// directory. It is safe for concurrent use. Update transactions run one at a
// time (a mutex serialises them, so they never conflict and a closure runs
// exactly once); View transactions run concurrently on snapshots.
type Badger struct {
	db    *badgerdb.DB
	space *diskspace.Guard

	// life is held shared by every transaction and exclusively by Close.
	life   sync.RWMutex
	closed bool

	// updateMu serialises Update transactions.
	updateMu sync.Mutex
}

var _ Store = (*Badger)(nil)

// Open opens (creating if needed) the ledger in dir.
func Open(dir string, opts Options) (*Badger, error) {
	if dir == "" && !opts.InMemory {
		return nil, errors.New("ledger: open: no directory given")
	}
	db, err := badgerdb.Open(badgerdb.Settings{
		Store: "ledger", Dir: dir, SyncWrites: opts.SyncWrites, InMemory: opts.InMemory,
		MemTableSize:   orDefault(opts.MemTableSize, DefaultMemTableSize),
		BlockCacheSize: orDefault(opts.BlockCacheSize, DefaultBlockCacheSize),
		Logger:         opts.Logger,
	})
	if err != nil {
		return nil, err
	}
	if err := checkFormat(db.DB); err != nil {
		_ = db.Close(context.Background())
		return nil, fmt.Errorf("ledger: open %s: %w", dir, err)
	}
	if err := dropRetiredDue(db.DB); err != nil {
		_ = db.Close(context.Background())
		return nil, fmt.Errorf("ledger: open %s: deleting the retired due index: %w", dir, err)
	}
	return &Badger{db: db, space: opts.Space}, nil
}

func orDefault(v, d int64) int64 {
	if v <= 0 {
		return d
	}
	return v
}

// checkFormat writes the layout version into a new ledger and refuses one
// written with another.
func checkFormat(db *badger.DB) error {
	return db.Update(func(txn *badger.Txn) error {
		item, err := txn.Get(formatKey())
		if errors.Is(err, badger.ErrKeyNotFound) {
			return txn.Set(formatKey(), []byte{layoutVersion})
		}
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			if len(v) != 1 || v[0] != layoutVersion {
				return fmt.Errorf("unsupported layout version %v (want %d)", v, layoutVersion)
			}
			return nil
		})
	})
}

// dropRetiredDue deletes the due index an older store keeps under 'd'
// (keys.go), which nothing reads. It looks first, so that a store without
// one costs a seek rather than Badger's DropPrefix, which holds writes back
// and flushes; a crash in the middle leaves keys that the next Open drops.
func dropRetiredDue(db *badger.DB) error {
	prefix := []byte{kindRetiredDue}
	found := false
	err := db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
		defer it.Close()
		it.Rewind()
		found = it.Valid()
		return nil
	})
	if err != nil || !found {
		return err
	}
	return db.DropPrefix(prefix)
}

// enter starts a transaction: ErrClosed after Close, else the caller must
// call s.life.RUnlock when done.
func (s *Badger) enter() error {
	s.life.RLock()
	if s.closed {
		s.life.RUnlock()
		return ErrClosed
	}
	return nil
}

// Update runs fn in a read-write transaction and commits it when fn returns
// nil. Nothing is committed when fn returns an error (returned as is), when
// any write in it failed (that error is returned even if fn ignored it), or
// when ctx is done by the time fn returns. fn must not start another
// transaction on the same Store, keep the Tx past its return or share it
// between goroutines. While the Options' Space guard refuses writes, Update
// fails with its *diskspace.Error (wrapped) without calling fn.
func (s *Badger) Update(ctx context.Context, fn func(Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.enter(); err != nil {
		return err
	}
	defer s.life.RUnlock()
	s.updateMu.Lock()
	defer s.updateMu.Unlock()
	if err := s.space.Check(); err != nil {
		return fmt.Errorf("ledger: write refused: %w", err)
	}

	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	tx := NewKVTx(kvtx.Badger(txn), false)
	err := fn(tx)
	written, txErr := tx.End()
	switch {
	case err != nil:
		return err
	case txErr != nil:
		return txErr
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := txn.Commit(); err != nil {
		return fmt.Errorf("ledger: commit: %w", commitErr(err))
	}
	s.space.Wrote(written)
	return nil
}

// CheckWrite reports whether an Update would be refused now by the Options'
// Space guard: nil, or its *diskspace.Error. The engine asks it to tell a
// handler's failure from the host's own inability to record it.
func (s *Badger) CheckWrite() error {
	if err := s.space.Check(); err != nil {
		return fmt.Errorf("ledger: write refused: %w", err)
	}
	return nil
}

// View runs fn in a read-only transaction on a snapshot of the ledger. Its
// writes fail with ErrReadOnly. fn's error is returned as is.
func (s *Badger) View(ctx context.Context, fn func(Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.enter(); err != nil {
		return err
	}
	defer s.life.RUnlock()
	txn := s.db.NewTransaction(false)
	defer txn.Discard()
	tx := NewKVTx(kvtx.Badger(txn), true)
	err := fn(tx)
	tx.End()
	return err
}

// Close waits for running transactions and closes the database. Later
// transactions fail with ErrClosed; closing again returns nil. Badger's
// close (flushing memtables) is not cut short, but Close waits for it only
// until ctx is done: then it returns an error naming the directory and the
// last error Badger logged, and the close goes on until the process exits.
// What was committed is in Badger's write-ahead log and replayed at the next
// Open, as after a crash.
func (s *Badger) Close(ctx context.Context) error {
	s.life.Lock()
	defer s.life.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	return s.db.Close(ctx)
}

// commitErr turns the error of a Badger commit into the ledger's.
func commitErr(err error) error {
	if errors.Is(err, badger.ErrTxnTooBig) {
		return fmt.Errorf("%w: %w", ErrTooBig, err)
	}
	return err
}
