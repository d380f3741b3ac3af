package subscription

import (
	"context"
	"fmt"

	"github.com/berthhq/berth/ledger"
)

// Hold, ResetHeld and Unhold are Reset split in three, for a ledger shared
// by several hosts: Reset writes the checkpoints of every partition, so no
// host may be running any of them meanwhile, nor write one back afterwards
// from what it had in memory. The cluster's reset holds the subscription on
// every host that owns a partition of it, has one host write the new
// checkpoints (with a guard that every owner in the ledger is holding), and
// unholds it everywhere; each host then starts again from the checkpoints
// written.

// Hold stops a subscription's run as a reset does — running attempts are
// cancelled (not counted, delivered again) — writes its checkpoints, and
// starts none again until every hold is lifted (Unhold with the same id),
// whatever Own says meanwhile (it keeps the set for then). Holding again with
// an id already held changes nothing. A subscription whose start is being
// tried again (startretry.go) is held by ending the retry. ErrClosed if the
// subscription is not running nor starting (nothing to hold).
func (e *Engine) Hold(ctx context.Context, sub, id string) error {
	s, err := e.sub(sub)
	if err != nil {
		return err
	}
	s.life.Lock()
	defer s.life.Unlock()
	if _, ok := s.holds[id]; ok {
		return nil
	}
	if len(s.holds) == 0 {
		switch {
		case s.run == nil && s.starting.retrying:
			s.endRetryLocked()
		case s.run == nil:
			return fmt.Errorf("subscription %q: not running: %w", s.name, ErrClosed)
		default:
			if err := s.stopLocked(ctx, true); err != nil {
				// Not held: nobody would start it again.
				s.startOrRetryLocked(context.WithoutCancel(ctx))
				return err
			}
		}
		e.logger.Info("subscription held for a reset", "subscription", s.name, "hold", id)
	}
	if s.holds == nil {
		s.holds = map[string]struct{}{}
	}
	s.holds[id] = struct{}{}
	return nil
}

// Unhold lifts the hold id; when it was the last, the subscription starts
// again from its stored checkpoints over the partitions it owns; a start
// that fails is tried again until it works (startretry.go), so Unhold does
// not fail for it. An id not held changes nothing.
func (e *Engine) Unhold(ctx context.Context, sub, id string) error {
	s, err := e.sub(sub)
	if err != nil {
		return err
	}
	// Read before s.life (Engine.mu comes first); Close stops a run started
	// after it read this.
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	s.life.Lock()
	defer s.life.Unlock()
	if _, ok := s.holds[id]; !ok {
		return nil
	}
	delete(s.holds, id)
	if len(s.holds) > 0 || closed || s.run != nil {
		return nil
	}
	e.logger.Info("subscription hold lifted", "subscription", s.name, "hold", id)
	s.startOrRetryLocked(context.WithoutCancel(ctx))
	return nil
}

// ResetHeld is Reset's write on a held subscription: it checks position as
// Reset does and writes every partition's checkpoint at position with the
// Spec's OnReset in one transaction, in which guard runs first (its error
// fails the reset and changes nothing). The runs start from there at the
// last Unhold. An error if the subscription is not held.
func (e *Engine) ResetHeld(ctx context.Context, sub string, position uint64, guard func(ledger.Tx) error, by Caller) error {
	s, err := e.sub(sub)
	if err != nil {
		return err
	}
	if err := e.checkReset(ctx, position); err != nil {
		return err
	}
	s.life.Lock()
	defer s.life.Unlock()
	if len(s.holds) == 0 {
		return fmt.Errorf("subscription %q: reset while not held: %w", s.name, ErrClosed)
	}
	return s.writeReset(ctx, position, guard, by)
}
