package eventlog

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/berthhq/berth/internal/badgerdb"
	"github.com/berthhq/berth/internal/diskspace"
	"github.com/berthhq/berth/internal/groupcommit"
	"github.com/dgraph-io/badger/v4"
)

// Badger is the embedded Log, kept in a Badger database under one directory.
// It is safe for concurrent use. Appends are written by one caller at a
// time, in groups of those waiting (group commit: append.go), so the
// version check, the position assigned and the write are one step and the
// positions have no gaps; reads run concurrently against Badger snapshots.
type Badger struct {
	db    *badgerdb.DB
	space *diskspace.Guard

	// life is held shared by every call and exclusively by Close, so Close
	// waits for running calls and later calls see closed.
	life   sync.RWMutex
	closed bool

	// appends is the group-commit queue every Append goes through.
	appends *groupcommit.Queue[*pendingAppend]
	// head is the position of the last commit; written by appends' writer.
	head atomic.Uint64

	waitMu sync.Mutex
	// changed is closed and replaced on each append, waking every Wait.
	changed chan struct{}
	// done is closed by Close, waking every Wait with ErrClosed.
	done chan struct{}
}

var _ Log = (*Badger)(nil)

// Open opens (creating if needed) the log in dir and recovers its head.
func Open(dir string, opts Options) (*Badger, error) {
	if dir == "" && !opts.InMemory {
		return nil, errors.New("eventlog: open: no directory given")
	}
	db, err := badgerdb.Open(badgerdb.Settings{
		Store: "eventlog", Dir: dir, SyncWrites: opts.SyncWrites, InMemory: opts.InMemory,
		MemTableSize:   orDefault(opts.MemTableSize, DefaultMemTableSize),
		BlockCacheSize: orDefault(opts.BlockCacheSize, DefaultBlockCacheSize),
		Logger:         opts.Logger,
	})
	if err != nil {
		return nil, err
	}
	b := &Badger{db: db, space: opts.Space, changed: make(chan struct{}), done: make(chan struct{}),
		appends: groupcommit.New[*pendingAppend](maxGroup)}
	head, err := b.recover()
	if err != nil {
		_ = db.Close(context.Background())
		return nil, fmt.Errorf("eventlog: open %s: %w", dir, err)
	}
	b.head.Store(head)
	return b, nil
}

func orDefault(v, d int64) int64 {
	if v <= 0 {
		return d
	}
	return v
}

// recover checks the layout version (writing it into a new log) and returns
// the position of the last commit.
func (b *Badger) recover() (uint64, error) {
	var head uint64
	err := b.db.Update(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Reverse: true, Prefix: []byte{kindPosition}})
		defer it.Close()
		it.Seek(positionKey(math.MaxUint64))
		if it.Valid() {
			head = binary.BigEndian.Uint64(it.Item().Key()[1:])
		}
		item, err := txn.Get(formatKey)
		switch {
		case errors.Is(err, badger.ErrKeyNotFound):
			if head != 0 {
				return errors.New("log has commits but no layout version")
			}
			return txn.Set(formatKey, []byte{layoutVersion})
		case err != nil:
			return err
		}
		return item.Value(func(v []byte) error {
			if len(v) != 1 || v[0] != layoutVersion {
				return fmt.Errorf("unsupported layout version %v (want %d)", v, layoutVersion)
			}
			return nil
		})
	})
	return head, err
}

// enter starts a call: it fails with ErrClosed after Close, else the caller
// must call b.life.RUnlock when done.
func (b *Badger) enter() error {
	b.life.RLock()
	if b.closed {
		b.life.RUnlock()
		return ErrClosed
	}
	return nil
}

// Close waits for running calls, wakes every Wait with ErrClosed and closes
// the database. Later calls fail with ErrClosed; closing again returns nil.
// Badger's close (flushing memtables) is not cut short, but Close waits for
// it only until ctx is done: then it returns an error naming the directory
// and the last error Badger logged, and the close goes on until the process
// exits. What was appended is in Badger's write-ahead log and replayed at
// the next Open, as after a crash.
func (b *Badger) Close(ctx context.Context) error {
	b.life.Lock()
	defer b.life.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	close(b.done)
	return b.db.Close(ctx)
}
