package subscription

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/berthhq/berth/ledger"
)

// caller is who made an operator's call and why, for its notification.
type caller struct{ actor, reason string }

type callerKey struct{}

// WithCaller returns ctx carrying the actor and reason of an operator's
// Pause, PauseUntil, Unpause or Reset: the notification the call queues
// names them. The calls take them from the context rather than as
// arguments so that a cluster forwards them unchanged.
func WithCaller(ctx context.Context, actor, reason string) context.Context {
	return context.WithValue(ctx, callerKey{}, caller{actor, reason})
}

func callerOf(ctx context.Context) caller {
	c, _ := ctx.Value(callerKey{}).(caller)
	return c
}

// notifyPauseChange queues the notification of a change of the stored
// pause state from old to now, in tx; none when the state did not change (a
// second pause, or another host of a cluster that found the change made).
func notifyPauseChange(ctx context.Context, tx ledger.Tx, sub string, old, now []byte, at time.Time) error {
	paused, until := parsePause(now)
	if wasPaused, _ := parsePause(old); bytes.Equal(old, now) || (!paused && !wasPaused) {
		return nil
	}
	c := callerOf(ctx)
	n := ledger.Notification{Type: ledger.NotifySubscriptionUnpaused, Time: at, Subscription: sub, Actor: c.actor, Reason: c.reason}
	if paused {
		n.Type = ledger.NotifySubscriptionPaused
		if !until.IsZero() {
			n.Until = &until
		}
	}
	return tx.Notify(n)
}

// storedPause reads the subscription's stored pause state in tx (nil when
// none was ever written).
func storedPause(tx ledger.Tx, sub string) ([]byte, error) {
	v, err := tx.Meta(sub, metaPaused)
	if errors.Is(err, ledger.ErrNotFound) {
		return nil, nil
	}
	return v, err
}

// noteOutageLocked queues the notification that the partition paused for
// an outage or went on after one; p.mu held. The pause lives in memory, so
// there is no transaction of the change to write it in: one goroutine per
// partition writes the queue in order, fenced, so a partition another host
// owns now says nothing more.
func (p *partition) noteOutageLocked(typ string, at time.Time, reason string) {
	idx := p.idx
	p.notes = append(p.notes, ledger.Notification{Type: typ, Time: at, Subscription: p.r.s.name, Partition: &idx, Reason: reason})
	if p.noting {
		return
	}
	p.noting = true
	p.r.wg.Add(1)
	go p.writeNotes()
}

func (p *partition) writeNotes() {
	defer p.r.wg.Done()
	for {
		p.mu.Lock()
		if len(p.notes) == 0 || p.ctx.Err() != nil {
			p.notes, p.noting = nil, false
			p.mu.Unlock()
			return
		}
		n := p.notes[0]
		p.notes = p.notes[1:]
		p.mu.Unlock()
		if err := p.update(p.ctx, func(tx ledger.Tx) error { return tx.Notify(n) }); err != nil && p.ctx.Err() == nil {
			p.r.e.logger.Warn("a partition's outage notification was not written", "subscription", p.r.s.name,
				"partition", p.idx, "type", n.Type, "error", err)
		}
	}
}
