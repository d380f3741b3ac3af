package jetstream

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Compaction keeps the stream from growing forever. When a host has applied
// Options.CompactEvery transactions past the last compaction point, it
// publishes a compaction point: a message (floorFormat) whose sequence M
// becomes every host's floor as it applies it, from which on a transaction
// whose snapshot is before M aborts (and its Update runs again on a fresh
// snapshot). The host that published it (the stream deduplicates the same
// point from several hosts by its message id) then writes its cache as of M
// to the object store <Stream>_SNAPSHOTS, and only once that is stored
// purges the stream below M+1-Options.CompactKeep (then removes the older
// snapshots).
//
// Why this is safe: a host with an empty cache (or one that fell behind the
// purge) restores the snapshot at M and replays the stream after it. Every
// transaction after M either read at or after M — what changed since is in
// the replayed tail, and the snapshot's versions (all at M) are not after
// its snapshot — or read before M and aborts on every host alike, by the
// floor, which every host learns at the same place in the stream. So a
// restored host decides every message as a host that applied the whole
// stream, and nothing in flight across the purge is misapplied.
//
// The CompactKeep transactions kept before M serve hosts running behind
// by a little; one that falls further behind finds the stream purged past
// it and restores the latest snapshot while running (restore.go), and
// Updates of its own it was waiting on learn no outcome.

// compactTimeout bounds one compaction: the point, the snapshot, the purge.
const compactTimeout = 10 * time.Minute

// dueCompaction asks the compactor to run when seq is CompactEvery past
// the floor. It is called with applyMu held, after seq was applied.
func (s *Store) dueCompaction(seq uint64) {
	if s.opts.CompactEvery <= 0 || seq-s.floor < uint64(s.opts.CompactEvery) {
		return
	}
	select {
	case s.compactDue <- struct{}{}:
	default: // one is asked for already
	}
}

// compactor runs compactions as they fall due, until ctx ends.
func (s *Store) compactor(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.compactDue:
		}
		if err := s.compact(ctx, false); err != nil && ctx.Err() == nil {
			s.opts.Logger.Warn("ledger: compaction failed; the stream is left as it was", "err", err.Error())
		}
	}
}

// compact publishes a compaction point and, if this host's was the one
// the stream took, snapshots and purges; unless forced, only when one is
// due.
func (s *Store) compact(ctx context.Context, force bool) error {
	ctx, cancel := context.WithTimeout(ctx, compactTimeout)
	defer cancel()
	s.applyMu.Lock()
	floor, applied := s.floor, s.appliedSeq()
	s.applyMu.Unlock()
	if !force && applied-floor < uint64(s.opts.CompactEvery) {
		return nil // another host's point landed since this was asked for
	}
	ack, err := s.publish(ctx, fmt.Sprintf("berth-floor-%s-%d", s.identity, floor), []byte{floorFormat})
	if err != nil {
		return err
	}
	if ack.Duplicate {
		return nil // another host publishes this point, and compacts
	}
	point := ack.Sequence
	if err := s.reach(ctx, point); err != nil {
		return err
	}
	obs, err := s.snapshotStore(ctx)
	if err != nil {
		return err
	}
	if err := s.writeSnapshot(ctx, obs, point); err != nil {
		return err
	}
	keep := uint64(s.opts.CompactKeep)
	if point+1 <= keep {
		return nil
	}
	below := point + 1 - keep
	_, err = request(ctx, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, s.stream.Purge(ctx, jetstream.WithPurgeSequence(below))
	})
	if err != nil {
		return fmt.Errorf("ledger/jetstream: purging %s below %d: %w", s.opts.Stream, below, err)
	}
	if err := s.dropSnapshots(ctx, obs, point); err != nil {
		// Harmless but for the room they take: the next compaction tries
		// again.
		s.opts.Logger.Warn("ledger: removing older snapshots", "err", err.Error())
	}
	s.opts.Logger.Info("ledger: stream compacted", "stream", s.opts.Stream, "point", point, "purged-below", below)
	return nil
}

// applyFloor applies a compaction point at seq: it becomes the floor.
func (s *Store) applyFloor(seq uint64) error {
	txn := s.db.NewTransactionAt(seq-1, true)
	defer txn.Discard()
	b := seqBytes(seq)
	if err := txn.Set(floorKey, b); err != nil {
		return err
	}
	if err := txn.Set(appliedKey, b); err != nil {
		return err
	}
	if err := txn.CommitAt(seq, nil); err != nil {
		return err
	}
	s.floor = seq
	return nil
}
