package jetstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// handle applies the stream's message at seq (id, its message id; data,
// its body). The consumer and fillTo may both deliver it; what was applied
// already is skipped. A message past the next one means the stream lost
// what lies between (a compaction purged past the cache): nothing is
// applied, and errGap is returned for the caller to restore the cache.
func (s *Store) handle(seq uint64, id string, data []byte) error {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	applied := s.appliedSeq()
	switch {
	case s.stopped || seq <= applied:
		return nil
	case seq > applied+1:
		return fmt.Errorf("%w: stream %s goes from %d to %d", errGap, s.opts.Stream, applied, seq)
	}
	committed, err := s.apply(seq, data)
	if err != nil {
		s.fail(fmt.Errorf("ledger/jetstream: applying stream sequence %d: %w", seq, err))
		return nil
	}
	s.advance(seq, id, committed)
	s.dueCompaction(seq)
	return nil
}

// apply decides the transaction at seq and, if it commits, writes it into
// the cache at timestamp seq. The decision depends on nothing but the
// stream's messages up to seq, so every host decides alike: the
// transaction aborts if it cannot be read, if its snapshot is not before
// seq or more than historyWindow before it or before the last compaction
// point (the floor, compact.go), or if anything it read changed
// after its snapshot (conflicts); else it commits. Either way the cache
// records seq as applied, in the same Badger transaction. A message of a
// format this host does not read (ErrLayout) is an error: the cache stops.
func (s *Store) apply(seq uint64, data []byte) (bool, error) {
	if isFloor(data) {
		return true, s.applyFloor(seq)
	}
	m, err := decodeMessage(data)
	commit := false
	switch {
	case errors.Is(err, ErrLayout):
		return false, err
	case err != nil:
		s.opts.Logger.Warn("ledger: a stream message that is no transaction, skipped", "seq", seq, "err", err.Error())
	case m.snapshot >= seq || seq-m.snapshot > historyWindow:
	case m.snapshot < s.floor:
		// Its snapshot is before the last compaction point: a host restored
		// from that point's snapshot could not tell what changed since.
	default:
		conflict, err := s.conflicts(m, seq)
		if err != nil {
			return false, err
		}
		commit = !conflict
	}
	txn := s.db.NewTransactionAt(seq-1, true)
	defer txn.Discard()
	if commit {
		for i, k := range m.keys {
			w := m.writes[i]
			if w.del {
				err = txn.Delete(k)
			} else {
				err = txn.Set(k, w.value)
			}
			if err != nil {
				return false, err
			}
		}
	}
	if err := txn.Set(appliedKey, seqBytes(seq)); err != nil {
		return false, err
	}
	if err := txn.CommitAt(seq, nil); err != nil {
		return false, err
	}
	if commit {
		s.recent.add(seq, m.keys, m.writes)
	}
	if seq > historyWindow {
		s.db.SetDiscardTs(seq - historyWindow)
	}
	return commit, nil
}

// conflicts reports whether a key m read, or any key in a range it
// iterated, has a version after m's snapshot (and so before seq: the cache
// has applied everything before seq). Deletes count: the iterator sees
// every version, delete markers included. What the last transactions
// wrote is in memory (recentWrites): when it reaches back to m's snapshot,
// it answers without Badger. (It may know of writes at seq and after,
// which readOnlyCurrent's caller has not applied yet: a closure that only
// read runs again, no harm; apply holds applyMu, so there are none.)
func (s *Store) conflicts(m *txMessage, seq uint64) (bool, error) {
	if conflict, decided := s.recent.conflicts(m); decided {
		return conflict, nil
	}
	return cacheConflicts(s.db.DB, m, seq)
}

// cacheConflicts is conflicts asking the cache's Badger db.
func cacheConflicts(db *badger.DB, m *txMessage, seq uint64) (bool, error) {
	txn := db.NewTransactionAt(seq-1, false)
	defer txn.Discard()
	it := txn.NewIterator(badger.IteratorOptions{AllVersions: true})
	defer it.Close()
	for _, k := range m.reads {
		// The first item at or after k is k's newest version, if k has any.
		it.Seek(k)
		if it.Valid() && bytes.Equal(it.Item().Key(), k) && it.Item().Version() > m.snapshot {
			return true, nil
		}
	}
	for _, r := range m.ranges {
		for it.Seek(r.start); it.Valid(); {
			item := it.Item()
			k := item.Key()
			if r.end != nil && bytes.Compare(k, r.end) >= 0 {
				break
			}
			if item.Version() > m.snapshot {
				return true, nil
			}
			it.Seek(append(bytes.Clone(k), 0)) // past k's older versions
		}
	}
	return false, nil
}

// appliedSeq returns the last stream sequence the cache applied.
func (s *Store) appliedSeq() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.applied
}

// advance records seq as applied, tells the Update that published it (by
// its message id) whether it committed, and wakes whoever waits.
func (s *Store) advance(seq uint64, id string, committed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.applied = seq
	if ch, ok := s.waiters[id]; ok {
		ch <- committed
		delete(s.waiters, id)
	} else if !committed {
		s.foreignAbort = seq
	}
	close(s.advanced)
	s.advanced = make(chan struct{})
}

// yieldWindow bounds how long an Update waits for another host's retry
// (see yield).
const yieldWindow = 20 * time.Millisecond

// yield lets another host's aborted transaction go first. Optimistic
// concurrency alone can starve a host: one nearer the stream's leader
// publishes sooner after each commit it learns of, so on a key both hosts
// keep writing its transactions land first every time, and the other's
// abort every time. So when this host has applied another host's abort as
// its last news, its next Update waits until one more message lands (that
// host's retry, most likely) or yieldWindow passes. It only orders
// attempts: correctness never rests on it.
func (s *Store) yield(ctx context.Context) {
	s.mu.Lock()
	abort := s.foreignAbort
	s.mu.Unlock()
	if abort == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, yieldWindow)
	defer cancel()
	_ = s.waitApplied(ctx, abort+1)
	s.mu.Lock()
	if s.foreignAbort == abort {
		s.foreignAbort = 0
	}
	s.mu.Unlock()
}

// fail stops the cache for good: every transaction from now on fails with
// err. The cache on disk holds what was applied before; a reopen goes on
// from there.
func (s *Store) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.broken == nil {
		s.broken = err
		s.opts.Logger.Error("ledger: the cache stopped", "err", err.Error())
		close(s.advanced)
		s.advanced = make(chan struct{})
	}
}

// waitApplied waits until the cache has applied seq.
func (s *Store) waitApplied(ctx context.Context, seq uint64) error {
	for {
		s.mu.Lock()
		applied, broken, advanced := s.applied, s.broken, s.advanced
		s.mu.Unlock()
		switch {
		case broken != nil:
			return broken
		case applied >= seq:
			return nil
		}
		select {
		case <-advanced:
		case <-ctx.Done():
			return fmt.Errorf("ledger/jetstream: catching up to stream sequence %d (applied %d): %w", seq, applied, context.Cause(ctx))
		}
	}
}

// errBroken returns the error that stopped the cache, if one did.
func (s *Store) errBroken() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.broken
}

var errNoOutcome = errors.New("ledger/jetstream: the transaction's outcome was not learnt")
