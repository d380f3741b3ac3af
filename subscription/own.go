package subscription

import (
	"context"
	"fmt"
	"maps"
)

// Own tells the engine which partitions of a subscription this host owns,
// and at which epoch each (partition → epoch), replacing what it was told
// before: the engine delivers the commits of those partitions only, each
// from its own checkpoint, and fences every ledger write for one of them by
// its epoch (fence.go); the commits of other partitions are another host's.
// The caller (the cluster's membership) claims a partition in the ledger
// (Tx.ClaimPartition) before it hands it over, and takes it away here before
// another host claims it.
//
// A change stops the subscription's run — no commit is read any more,
// attempts in flight are cancelled (never counted or parked; their events
// are delivered again), its checkpoints are written — and starts a run over
// the new set. So each aggregate's partition is handled by exactly one run
// at a time, and its order holds across the change. When Own returns, the
// engine writes nothing more for a partition left out. The same set again
// changes nothing. A stopped or not yet started subscription keeps the set
// for its start, as does one whose start is being tried again.
//
// A restart that fails is tried again until it works (startretry.go):
// Own's error is then the stop's only, and the start's is in the log and
// in Status. A new set given while a start is tried again is tried at
// once.
//
// Own needs Options.Host: a single host owns every partition
// (ErrBadPartition otherwise, as for a partition outside 0 to
// Options.Partitions-1).
func (e *Engine) Own(ctx context.Context, subscription string, owned map[int]uint64) error {
	if e.opts.Host == "" {
		return fmt.Errorf("%w: Own needs Options.Host; a single host owns every partition", ErrBadPartition)
	}
	for i := range owned {
		if i < 0 || i >= e.opts.Partitions {
			return fmt.Errorf("%w: partition %d of %q, not in 0 to %d", ErrBadPartition, i, subscription, e.opts.Partitions-1)
		}
	}
	e.mu.Lock()
	closed := e.closed
	s, err := e.subLocked(subscription)
	e.mu.Unlock()
	switch {
	case closed:
		return ErrClosed
	case err != nil:
		return err
	}
	s.life.Lock()
	defer s.life.Unlock()
	if s.run != nil && maps.Equal(s.owned, owned) {
		return nil
	}
	s.owned = maps.Clone(owned)
	if s.run == nil {
		if s.starting.retrying && len(owned) > 0 {
			// A start tried again with backoff would take the new set up
			// only at its next try, up to StartBackoffMax away — after a
			// network fault healed, its partitions would wait that long.
			// The cluster has just claimed them through the ledger: try
			// now. A failure leaves the retry as it was.
			s.startOrRetryLocked(context.WithoutCancel(ctx))
		}
		return nil
	}
	// The final checkpoints are written under the old epochs; a partition
	// fenced meanwhile writes nothing.
	stopErr := s.stopLocked(ctx, true)
	s.startOrRetryLocked(context.WithoutCancel(ctx))
	return stopErr
}
