package subscription

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/ledger"
)

// Resume resumes a parked aggregate: its stream is read again from the event
// it stopped at, so the handler sees every event it missed, in order, and it
// then rejoins live delivery with no gap and no duplicate. The record's
// history keeps who resumed it, when and why, and a "resumed" notification
// is queued in the same transaction. Resuming an aggregate that is not parked
// (or already resuming) is ErrNotParked and changes nothing: resume is
// idempotent.
func (e *Engine) Resume(ctx context.Context, sub, aggregateType, aggregateID string, by Caller) error {
	actor, reason := by.Actor, by.Reason
	s, r, p, done, err := e.lockParked(ctx, sub, aggregateType, aggregateID)
	if err != nil {
		return err
	}
	defer done()
	k := aggKey{aggregateType, aggregateID}
	now := e.clock.Now()
	var rec *ledger.Record
	err = r.withCheckpoint(ctx, p, 0, func(tx ledger.Tx) error {
		var err error
		if rec, err = parkedRecord(tx, s.name, k); err != nil {
			return err
		}
		rec.State, rec.NextRetry, rec.WaitReason = ledger.StateResuming, time.Time{}, ""
		rec.AddHistory(ledger.Entry{Time: now, Action: "resume", Version: rec.Version, Actor: actor, Reason: reason})
		if err := tx.PutParked(rec); err != nil {
			return err
		}
		return tx.Notify(ledger.Notification{Type: ledger.NotifyResumed, Time: now, Subscription: s.name,
			AggregateType: k.typ, AggregateID: k.id, Version: rec.Version, Actor: actor, By: actorKind(actor), Reason: reason})
	})
	if err != nil {
		return err
	}
	e.sched.remove(s.name, k)
	e.obs.resolved(s.name, "resume", actor, rec.FirstFailure, now)
	e.trace.restore(recordKey(rec), rec.Traceparent)
	e.trace.resumed(recordKey(rec), actor)
	e.storm.Log(slog.LevelInfo, "parked aggregate resumed", "subscription", s.name, "aggregate", k.String(),
		"version", rec.Version, "actor", actor, "reason", reason)
	r.beginReplay(p, k, rec.Version, int(rec.Index), recordKey(rec))
	return nil
}

// Skip moves a parked aggregate past the events it held back and rejoins
// live delivery. throughVersion 0 skips every event of the aggregate in the
// log at the time of the call; otherwise the events up to and including
// throughVersion are skipped and later ones delivered in order (it must be
// at least the version the aggregate stopped at and at most its current
// version, else ErrBadVersion). Recorded in the history and notified
// ("skipped") like Resume; ErrNotParked when the aggregate is not parked.
func (e *Engine) Skip(ctx context.Context, sub, aggregateType, aggregateID string, throughVersion uint64, by Caller) error {
	actor, reason := by.Actor, by.Reason
	s, r, p, done, err := e.lockParked(ctx, sub, aggregateType, aggregateID)
	if err != nil {
		return err
	}
	defer done()
	k := aggKey{aggregateType, aggregateID}
	head, err := e.events.Version(ctx, aggregateType, aggregateID)
	if err != nil {
		return err
	}
	now := e.clock.Now()
	var through uint64
	var first time.Time // the record's first failure, for the Observer
	err = r.withCheckpoint(ctx, p, 0, func(tx ledger.Tx) error {
		rec, err := parkedRecord(tx, s.name, k)
		if err != nil {
			return err
		}
		through = throughVersion
		if through == 0 {
			through = head
		}
		if through < rec.Version || through > head {
			return fmt.Errorf("%w: skip through %d of %s, parked at %d, at version %d",
				ErrBadVersion, through, k, rec.Version, head)
		}
		stopped := rec.Version
		first = rec.FirstFailure
		rec.State, rec.NextRetry, rec.WaitReason = ledger.StateResuming, time.Time{}, ""
		// A resuming record names where the replay starts.
		rec.Version, rec.Index = through+1, 0
		rec.InvocationKey = eventKey(s.name, k, rec.Version, rec.Index)
		rec.AddHistory(ledger.Entry{Time: now, Action: "skip", Version: through, Actor: actor,
			Reason: fmt.Sprintf("skipped versions %d to %d: %s", stopped, through, reason)})
		if err := tx.PutParked(rec); err != nil {
			return err
		}
		return tx.Notify(ledger.Notification{Type: ledger.NotifySkipped, Time: now, Subscription: s.name,
			AggregateType: k.typ, AggregateID: k.id, Version: through, Actor: actor, By: actorKind(actor), Reason: reason})
	})
	if err != nil {
		return err
	}
	e.sched.remove(s.name, k)
	e.obs.resolved(s.name, "skip", actor, first, now)
	e.storm.Log(slog.LevelInfo, "parked aggregate skipped", "subscription", s.name, "aggregate", k.String(),
		"through", through, "actor", actor, "reason", reason)
	r.beginReplay(p, k, through+1, 0, "")
	return nil
}

// ownerOf returns the aggregate's partition for an operator's call, once
// the run holds its parked aggregates;
// ErrNotOwned when this host does not work on it (the owner's host must be
// asked).
func (r *run) ownerOf(ctx context.Context, k aggKey) (*partition, error) {
	if err := r.awaitHeld(ctx); err != nil {
		return nil, err
	}
	p := r.livePartition(k)
	if p == nil {
		return nil, fmt.Errorf("%w: %s of %q is in partition %d", ErrNotOwned, k, r.s.name,
			eventlog.PartitionOf(k.typ, k.id, len(r.parts)))
	}
	return p, nil
}

// parkedRecord returns a record that an operator may resume or skip.
func parkedRecord(tx ledger.ParkedRecords, sub string, k aggKey) (*ledger.Record, error) {
	rec, err := tx.Parked(sub, k.typ, k.id)
	if errors.Is(err, ledger.ErrNotFound) {
		return nil, fmt.Errorf("%w: %s of %q", ErrNotParked, k, sub)
	}
	if err != nil {
		return nil, err
	}
	if rec.State == ledger.StateResuming {
		return nil, fmt.Errorf("%w: %s of %q is already resuming", ErrNotParked, k, sub)
	}
	return rec, nil
}

// lockParked is the opening of an operator's resume or skip of a parked
// aggregate: the subscription, its current run, and the aggregate's
// partition, which this host must own, with the aggregate's key held
// (ErrBusy while a long-horizon retry holds it past ctx). done releases
// the key and the run.
func (e *Engine) lockParked(ctx context.Context, sub, aggregateType, aggregateID string) (s *subscription, r *run, p *partition, done func(), err error) {
	if s, err = e.sub(sub); err != nil {
		return nil, nil, nil, nil, err
	}
	r, release, err := s.current()
	if err != nil {
		return nil, nil, nil, nil, err
	}
	k := aggKey{aggregateType, aggregateID}
	if p, err = r.ownerOf(ctx, k); err != nil {
		release()
		return nil, nil, nil, nil, err
	}
	unlock, err := s.keys.lockCtx(ctx, k)
	if err != nil {
		release()
		return nil, nil, nil, nil, fmt.Errorf("%w: %s of %q is being retried: %v", ErrBusy, k, sub, err)
	}
	return s, r, p, func() { unlock(); release() }, nil
}

// Parked returns a subscription's record of a parked aggregate;
// ErrNotParked if there is none.
func (e *Engine) Parked(ctx context.Context, sub, aggregateType, aggregateID string) (*ledger.Record, error) {
	s, err := e.sub(sub)
	if err != nil {
		return nil, err
	}
	var rec *ledger.Record
	err = e.store.View(ctx, func(tx ledger.Tx) error {
		var err error
		rec, err = tx.Parked(s.name, aggregateType, aggregateID)
		if errors.Is(err, ledger.ErrNotFound) {
			return fmt.Errorf("%w: %s/%s of %q", ErrNotParked, aggregateType, aggregateID, sub)
		}
		return err
	})
	return rec, err
}

// Pause stops a subscription's delivery: no new attempt starts (attempts
// running finish), parked retries wait too. The state is kept in the ledger,
// so a paused subscription stays paused after a restart. Idempotent. A
// change queues a "subscription-paused" notification in the same
// transaction, naming the caller; Unpause's is
// "subscription-unpaused", Reset's "subscription-reset".
func (e *Engine) Pause(ctx context.Context, sub string, by Caller) error {
	return e.setPause(ctx, sub, true, time.Time{}, by)
}

// Unpause lets a paused subscription go on (also one paused until a time).
// Idempotent.
func (e *Engine) Unpause(ctx context.Context, sub string, by Caller) error {
	return e.setPause(ctx, sub, false, time.Time{}, by)
}

func (e *Engine) setPause(ctx context.Context, sub string, paused bool, until time.Time, by Caller) error {
	s, err := e.sub(sub)
	if err != nil {
		return err
	}
	now := e.clock.Now()
	if err := e.store.Update(ctx, func(tx ledger.Tx) error {
		old, err := storedPause(tx, s.name)
		if err != nil {
			return err
		}
		v := pauseValue(paused, until)
		if err := tx.SetMeta(s.name, metaPaused, v); err != nil {
			return err
		}
		return notifyPauseChange(by, tx, s.name, old, v, now)
	}); err != nil {
		return err
	}
	s.applyPause(paused, until)
	if paused && !until.IsZero() {
		e.logger.Info("subscription paused until", "subscription", s.name, "until", until)
		return nil
	}
	e.logger.Info("subscription "+map[bool]string{true: "paused", false: "unpaused"}[paused], "subscription", s.name)
	return nil
}

// Reset moves a subscription's checkpoint, and that of every one of its
// partitions, to position (1 = the beginning, head+1 = the end) and restarts
// its delivery from there. Running attempts are cancelled; parked aggregates
// stay parked. The Spec's OnReset runs in the same transaction as the
// checkpoints' write, after every attempt ended. On a ledger shared by
// several hosts it writes the checkpoints of partitions other hosts own too,
// so it must not be called there while they run: the cluster's reset holds
// the subscription on every host first (Hold, ResetHeld, Unhold). A
// subscription whose start is being tried again (startretry.go) is reset
// too, and starts from the new position.
func (e *Engine) Reset(ctx context.Context, sub string, position uint64, by Caller) error {
	s, err := e.sub(sub)
	if err != nil {
		return err
	}
	if err := e.checkReset(ctx, position); err != nil {
		return err
	}
	s.life.Lock()
	defer s.life.Unlock()
	if s.run == nil && !s.starting.retrying {
		return fmt.Errorf("subscription %q: not running: %w", s.name, ErrClosed)
	}
	if err := s.stopLocked(ctx, false); err != nil {
		return err
	}
	if err := s.writeReset(ctx, position, nil, by); err != nil {
		// Carry on from the old checkpoint rather than stay stopped.
		s.startOrRetryLocked(context.WithoutCancel(ctx))
		return err
	}
	// The reset is written: a start that fails is tried again
	// (startretry.go), and the reset stands.
	s.startOrRetryLocked(context.WithoutCancel(ctx))
	return nil
}

// checkReset refuses a reset to a position beyond the log's head + 1, and
// one the ledger could not write: before anything stops, since a run
// stopped now could not write its way back (storefull.go).
func (e *Engine) checkReset(ctx context.Context, position uint64) error {
	head, err := e.events.Head(ctx)
	if err != nil {
		return err
	}
	if position < 1 || position > head+1 {
		return fmt.Errorf("%w: %d (head %d)", ErrBadPosition, position, head)
	}
	return e.storeRefuses()
}

// writeReset writes every partition's checkpoint at position with the
// Spec's OnReset in one transaction, after guard (nil: none) let it; no run
// of s may be running (s.life held).
func (s *subscription) writeReset(ctx context.Context, position uint64, guard func(ledger.Tx) error, by Caller) error {
	e := s.e
	if err := e.store.Update(ctx, func(tx ledger.Tx) error {
		if guard != nil {
			if err := guard(tx); err != nil {
				return err
			}
		}
		if hook := s.cur.Load().spec.OnReset; hook != nil {
			if err := hook(tx, position); err != nil {
				return err
			}
		}
		if err := setEveryCheckpoint(tx, s.name, e.opts.Partitions, position); err != nil {
			return err
		}
		return tx.Notify(ledger.Notification{Type: ledger.NotifySubscriptionReset, Time: e.clock.Now(), Subscription: s.name,
			Position: position, Actor: by.Actor, Reason: by.Reason})
	}); err != nil {
		return err
	}
	e.logger.Info("subscription reset", "subscription", s.name, "position", position)
	return nil
}
