package subscription

import (
	"context"
	"errors"
	"time"

	"github.com/berthhq/berth/ledger"
)

// Each partition keeps its own checkpoint in the ledger
// (Tx.SetPartitionCheckpoint), since partitions move between hosts; the
// subscription's checkpoint is kept beside them while one run owns every
// partition, as the lowest of theirs, for status, for a ledger read by an
// older host, and as the starting point of a partition with no checkpoint of
// its own (startpoint.go).

// withCheckpoint runs fn in one ledger transaction of partition p together
// with p's checkpoint as it stands with pos finished (pos 0: as it stands).
// A park, resume or skip thus moves the checkpoint atomically with the
// ledger change that makes the move safe: the checkpoint never passes a held
// commit whose record is not durable. pos is marked finished only once the
// transaction has committed. The transaction is fenced (fence.go).
//
// Parks, resumes and skips of one subscription run at once, so that their
// transactions share commits (and fsyncs): each writes the checkpoint it
// computed only past the one stored (raiseCheckpoint), so that one
// computed earlier and committed later does not take the stored one back.
// Each leaves out the positions the others have not finished yet.
func (r *run) withCheckpoint(ctx context.Context, p *partition, pos uint64, fn func(ledger.Tx) error) error {
	t := p.tracker
	lw := t.lowWater()
	if pos != 0 {
		lw = t.lowWaterWith(pos)
	}
	write := lw > t.durable()
	err := p.update(ctx, func(tx ledger.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		if write {
			return raiseCheckpoint(tx, r.s.name, p.idx, lw)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if write {
		t.setDurable(lw)
	}
	if pos != 0 {
		t.finish(pos)
	}
	return nil
}

// flush writes the in-memory checkpoints that moved: those of the live
// partitions, and the subscription's while the run owns every partition.
func (r *run) flush(ctx context.Context) error {
	r.s.cpMu.Lock()
	defer r.s.cpMu.Unlock()
	var moved []*partition
	var lws []uint64
	lowest, all, first := uint64(0), r.all, true
	for _, p := range r.owned {
		if p.isFenced() {
			all = false
			continue
		}
		lw, durable := p.tracker.lowWater(), p.tracker.durable()
		if lw > durable {
			moved = append(moved, p)
			lws = append(lws, lw)
		}
		if first || max(lw, durable) < lowest {
			lowest, first = max(lw, durable), false
		}
	}
	subWrite := all && lowest > r.subDurable
	if len(moved) == 0 && !subWrite {
		return nil
	}
	r.pending.Store(0)
	err := r.update(ctx, moved, func(tx ledger.Tx) error {
		for i, p := range moved {
			if err := raiseCheckpoint(tx, r.s.name, p.idx, lws[i]); err != nil {
				return err
			}
		}
		if subWrite {
			return tx.SetCheckpoint(r.s.name, lowest)
		}
		return nil
	})
	if errors.Is(err, ledger.ErrFenced) && len(moved) > 1 {
		// One of them was lost to another host: the others are still
		// this host's, each in a transaction of its own, which tells which.
		return r.flushEach(ctx, moved, lws)
	}
	if err != nil {
		return err
	}
	for i, p := range moved {
		p.tracker.setDurable(lws[i])
	}
	if subWrite {
		r.subDurable = lowest
	}
	return nil
}

// flushEach writes each partition's checkpoint in a transaction of its own;
// cpMu held.
func (r *run) flushEach(ctx context.Context, moved []*partition, lws []uint64) error {
	var errs []error
	for i, p := range moved {
		err := p.update(ctx, func(tx ledger.Tx) error {
			return raiseCheckpoint(tx, r.s.name, p.idx, lws[i])
		})
		switch {
		case err == nil:
			p.tracker.setDurable(lws[i])
		case !errors.Is(err, ledger.ErrFenced):
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// finished marks a live position of p finished, asking the flusher for a
// write when enough have piled up since the last one.
func (p *partition) finished(pos uint64) {
	r := p.r
	if p.tracker.finish(pos) && r.pending.Add(1) >= int64(r.e.opts.CheckpointEvery) {
		select {
		case r.flushReq <- struct{}{}:
		default:
		}
	}
}

// flusher batches checkpoint writes: every CheckpointEvery finished commits
// or CheckpointInterval, whichever comes first. The interval runs on real
// time, not the engine's Clock: it only bounds how much is redelivered after
// a crash, and a fake clock would have to be advanced just to persist.
func (r *run) flusher() {
	defer r.wg.Done()
	tick := time.NewTicker(r.e.opts.CheckpointInterval)
	defer tick.Stop()
	failing := false // said once when writes start failing (a full disk), and once when they work again
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-tick.C:
		case <-r.flushReq:
		}
		switch err := r.flush(r.ctx); {
		case err != nil && r.ctx.Err() == nil && !failing:
			failing = true
			r.e.logger.Error("checkpoint write failed; events go on being handled and the checkpoint is written when the ledger takes writes again",
				"subscription", r.s.name, "err", err)
		case err == nil && failing:
			failing = false
			r.e.logger.Info("checkpoint written again", "subscription", r.s.name)
		}
	}
}

// raiseCheckpoint stores lw as partition's checkpoint unless the stored one
// is past it already: the run's checkpoint writes commit in any order.
func raiseCheckpoint(tx ledger.SubscriptionState, sub string, partition int, lw uint64) error {
	stored, ok, err := tx.PartitionCheckpoint(sub, partition)
	if err != nil {
		return err
	}
	if ok && stored >= lw {
		return nil
	}
	return tx.SetPartitionCheckpoint(sub, partition, lw)
}
