package ledger

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/berthhq/berth/internal/badgerdb"
	"github.com/berthhq/berth/internal/diskspace"
	"github.com/berthhq/berth/internal/groupcommit"
	"github.com/berthhq/berth/ledger/internal/kvtx"
	"github.com/dgraph-io/badger/v4"
)

// Badger is the embedded Store, kept in a Badger database under one
// directory. It is safe for concurrent use. Update transactions run one at
// a time, so they never conflict; those that wait while one runs are run
// together, in the order they came, in one Badger transaction, and so with
// SyncWrites under one fsync (group commit). View transactions run
// concurrently on snapshots.
type Badger struct {
	db    *badgerdb.DB
	space *diskspace.Guard

	// life is held shared by every transaction and exclusively by Close.
	life   sync.RWMutex
	closed bool

	// updates is the group-commit queue every Update goes through.
	updates *groupcommit.Queue[*pendingUpdate]

	// cache answers Views' counters until the next write (readcache.go).
	cache *readCache
}

// maxGroup bounds the Updates that one Badger transaction takes.
const maxGroup = 256

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
	b := &Badger{db: db, space: opts.Space, updates: groupcommit.New[*pendingUpdate](maxGroup),
		cache: newReadCache()}
	if err := BuildIndex(context.Background(), b); err != nil {
		_ = b.Close(context.Background())
		return nil, fmt.Errorf("ledger: open %s: %w", dir, err)
	}
	return b, nil
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
//
// fn may run on another caller's goroutine (the one writing its group), and
// more than once: again when a closure grouped after it fails, as the Store
// contract allows. A panic in fn is raised again on Update's caller.
func (s *Badger) Update(ctx context.Context, fn func(Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.enter(); err != nil {
		return err
	}
	defer s.life.RUnlock()
	p := &pendingUpdate{ctx: ctx, fn: fn, err: errNotWritten}
	s.updates.Do(p, s.writeMarked)
	if p.panicked != nil {
		panic(p.panicked)
	}
	return p.err
}

// pendingUpdate is one Update in the group-commit queue; write records its
// outcome in it.
type pendingUpdate struct {
	ctx      context.Context
	fn       func(Tx) error
	written  int64 // bytes, for the space guard
	err      error
	panicked any // fn's panic, raised again on its caller's goroutine
}

// errNotWritten is a pending Update's outcome until its group is written.
var errNotWritten = errors.New("ledger: update not written (the update that wrote its group failed)")

// writeMarked is write with the read cache told a write runs: Views
// taken meanwhile read Badger alone, and later ones read it again. It
// holds only while write returns once its commits are visible (Badger's
// Commit returns after them): a writer that commits later must end the
// mark after its commit.
func (s *Badger) writeMarked(group []*pendingUpdate) {
	defer s.cache.writing()()
	s.write(group)
}

// write runs the group's closures in one Badger transaction and commits
// it. A closure that fails (or whose ctx ended) is rolled back alone: the
// transaction is begun again with the closures that succeeded before it,
// run again on the same state (Update's closure may run more than once).
// One that makes the transaction too big beside the others is run again
// after they are committed, alone.
func (s *Badger) write(group []*pendingUpdate) {
	// txn is begun when a closure is about to run, not after a commit:
	// Badger's NewTransaction waits until its watermark goroutine has
	// seen every commit done, which on a busy host is a wait for that
	// goroutine's turn on a core, and the group's callers would wait for
	// it after their commit (docs/BENCHMARKS.md, session 37).
	var txn *badger.Txn
	begin := func() *badger.Txn {
		if txn == nil {
			txn = s.db.NewTransaction(true)
		}
		return txn
	}
	drop := func() {
		if txn != nil {
			txn.Discard()
			txn = nil
		}
	}
	defer drop()
	var ok []*pendingUpdate // run in txn, not yet committed
	commit := func() {
		err := txn.Commit()
		if err != nil {
			err = fmt.Errorf("ledger: commit: %w", commitErr(err))
		}
		for _, p := range ok {
			p.err = err
			if err == nil {
				s.space.Wrote(p.written)
			}
		}
		ok = ok[:0]
		drop()
	}
	// rebuild begins txn again with the closures in ok, dropping any that
	// now fail.
	rebuild := func() {
		for {
			drop()
			tx := begin()
			failed := -1
			for i, q := range ok {
				if !s.run(tx, q) {
					failed = i
					break
				}
			}
			if failed < 0 {
				return
			}
			ok = append(ok[:failed:failed], ok[failed+1:]...)
		}
	}
	for _, p := range group {
		if err := s.space.Check(); err != nil {
			p.err = fmt.Errorf("ledger: write refused: %w", err)
			continue
		}
		if s.run(begin(), p) {
			ok = append(ok, p)
			continue
		}
		rebuild()
		if errors.Is(p.err, ErrTooBig) && p.panicked == nil && len(ok) > 0 {
			commit()
			if s.run(begin(), p) {
				ok = append(ok, p)
			} else {
				rebuild()
			}
		}
	}
	if len(ok) > 0 {
		commit()
	}
}

// run runs p's closure in txn and reports whether it may be committed;
// when not, p.err (or p.panicked) says why, and txn holds its writes.
func (s *Badger) run(txn *badger.Txn, p *pendingUpdate) (ok bool) {
	if err := p.ctx.Err(); err != nil {
		p.err = err
		return false
	}
	tx := newKVTx(kvtx.Badger(txn), false)
	defer func() {
		if r := recover(); r != nil {
			tx.End()
			p.panicked, p.err, ok = r, errNotWritten, false
		}
	}()
	err := p.fn(tx)
	written, txErr := tx.End()
	if err == nil {
		err = txErr
	}
	if err == nil {
		err = p.ctx.Err()
	}
	p.err, p.written = err, written
	return err == nil
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
	var txn *badger.Txn
	kv := s.cache.view(func() kvtx.Txn {
		txn = s.db.NewTransaction(false)
		return kvtx.Badger(txn)
	})
	defer txn.Discard()
	tx := newKVTx(kv, true)
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
