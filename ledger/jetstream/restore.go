package jetstream

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/berthhq/berth/internal/badgerdb"
	"github.com/dgraph-io/badger/v4"
	"github.com/nats-io/nats.go/jetstream"
)

// A cache is restored from the stream's latest snapshot when the stream no
// longer holds what it lacks: at Open (restoreCache: a new host, or one
// closed since long), or while running, when the consumer finds the stream
// purged past it (restoreBehind: a host that fell behind a compaction by
// more than CompactKeep, partitioned from NATS, say).

// restoreSnapshot makes the cache db hold what the snapshot r holds as
// the ledger at seq, after what it held at from (its applied sequence, 0
// when empty): every key of the snapshot is written at seq, every other
// ledger key it held is deleted at seq, and seq becomes the sequence
// applied and the floor. Reads at from and before see nothing of it. The
// applied sequence is written last: a cache left half restored reads as
// having applied from, and is restored again.
func restoreSnapshot(db *badgerdb.DB, r io.Reader, seq, from uint64) error {
	wb := db.NewManagedWriteBatch()
	defer wb.Cancel()
	txn := db.NewTransactionAt(from, false)
	defer txn.Discard()
	it := txn.NewIterator(badger.IteratorOptions{})
	defer it.Close()
	it.Seek([]byte{1}) // past the cache's own keys
	// dropBefore deletes the cache's keys before k (all of them: nil).
	dropBefore := func(k []byte) error {
		for ; it.Valid() && (k == nil || bytes.Compare(it.Item().Key(), k) < 0); it.Next() {
			if err := wb.DeleteAt(it.Item().KeyCopy(nil), seq); err != nil {
				return err
			}
		}
		return nil
	}
	br := bufio.NewReaderSize(r, snapshotReadSize)
	for {
		k, err := readLP(br)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("the snapshot at %d: %w", seq, err)
		}
		v, err := readLP(br)
		if err != nil {
			return fmt.Errorf("the snapshot at %d: %w", seq, errors.Join(errMalformed, err))
		}
		if err := dropBefore(k); err != nil {
			return err
		}
		if it.Valid() && bytes.Equal(it.Item().Key(), k) {
			it.Next()
		}
		if err := wb.SetEntryAt(badger.NewEntry(k, v), seq); err != nil {
			return err
		}
	}
	if err := dropBefore(nil); err != nil {
		return err
	}
	if err := wb.SetEntryAt(badger.NewEntry(floorKey, seqBytes(seq)), seq); err != nil {
		return err
	}
	if err := wb.Flush(); err != nil {
		return err
	}
	at := db.NewTransactionAt(seq, true)
	defer at.Discard()
	if err := at.Set(appliedKey, seqBytes(seq)); err != nil {
		return err
	}
	return at.CommitAt(seq, nil)
}

// restoreCache replaces the cache db, which lacks transactions the stream
// no longer holds (it starts at first; applied is the cache's last), by
// the stream's latest snapshot, if that reaches first.
func restoreCache(ctx context.Context, js jetstream.JetStream, o Options, db *badgerdb.DB, identity string, first, applied, last uint64) (*badgerdb.DB, cacheState, error) {
	r, meta, err := openSnapshot(ctx, js, o, identity)
	if err == nil && meta.seq+1 < first {
		r.Close()
		err = fmt.Errorf("the latest snapshot is at %d", meta.seq)
	}
	if err != nil {
		_ = db.Close(context.Background())
		if errors.Is(err, ErrLayout) {
			return nil, cacheState{}, err
		}
		return nil, cacheState{}, fmt.Errorf("ledger/jetstream: stream %s starts at sequence %d, but the cache has applied only %d: "+
			"the transactions between were removed from the stream, and no snapshot holds them (%v)", o.Stream, first, applied, err)
	}
	defer r.Close()
	dir := cacheDir(o.Dir, o.Stream)
	// Start from an empty cache: nothing of what it held may stay beside the
	// snapshot's state.
	if err := db.Close(ctx); err != nil {
		return nil, cacheState{}, fmt.Errorf("ledger/jetstream: closing the cache to restore it: %w", err)
	}
	if dir != "" {
		if err := os.RemoveAll(dir); err != nil {
			return nil, cacheState{}, fmt.Errorf("ledger/jetstream: removing the cache %s to restore it: %w", dir, err)
		}
	}
	db, _, err = loadCache(dir, identity, last, o)
	if err != nil {
		return nil, cacheState{}, err
	}
	if err := restoreSnapshot(db, r, meta.seq, 0); err != nil {
		_ = db.Close(context.Background())
		return nil, cacheState{}, fmt.Errorf("ledger/jetstream: restoring the cache from the snapshot at %d: %w", meta.seq, err)
	}
	o.Logger.Info("ledger cache restored from the snapshot", "stream", o.Stream, "seq", meta.seq)
	return db, cacheState{applied: meta.seq, floor: meta.seq, identity: identity}, nil
}

// errGap means the stream skips past the next sequence the cache needs:
// it was purged past the cache (or a message was deleted).
var errGap = errors.New("ledger/jetstream: the stream skips sequences the cache lacks")

// restoreBehind restores the running cache from the stream's latest
// snapshot, after the consumer found the stream purged past it. Updates
// waiting for a transaction the snapshot covers learn no outcome (it was
// not applied here); Views then see the ledger at the snapshot and after.
func (s *Store) restoreBehind(ctx context.Context) error {
	r, meta, err := openSnapshot(ctx, s.js, s.opts, s.identity)
	if err != nil {
		return fmt.Errorf("ledger/jetstream: the cache fell behind a compaction of %s and cannot be restored: %w", s.opts.Stream, err)
	}
	defer r.Close()
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	applied := s.appliedSeq()
	switch {
	case s.stopped:
		return nil
	case meta.seq <= applied:
		return fmt.Errorf("%w: stream %s, applied %d, and the latest snapshot is at %d", errGap, s.opts.Stream, applied, meta.seq)
	}
	if err := restoreSnapshot(s.db, r, meta.seq, applied); err != nil {
		return fmt.Errorf("ledger/jetstream: restoring the cache from the snapshot at %d: %w", meta.seq, err)
	}
	s.floor = meta.seq
	s.recent.reset(meta.seq)
	s.advance(meta.seq, "", true)
	s.opts.Logger.Warn("ledger cache fell behind a compaction; restored from the snapshot", "stream", s.opts.Stream, "from", applied, "seq", meta.seq)
	return nil
}
