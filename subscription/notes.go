package subscription

import (
	"bytes"
	"errors"
	"time"

	"github.com/berthhq/berth/ledger"
)

// Caller is who made an operator's call and why. Every operator call
// (Resume, Skip, Pause, PauseUntil, Unpause, Reset) takes one: the
// record's history and the notification the call queues name them.
type Caller struct {
	// Actor names who called: the API's token name, or a bulk job
	// ("job 7 (ops)").
	Actor string
	// Reason is the caller's reason, as given; may be empty.
	Reason string
}

// notifyPauseChange queues the notification of a change of the stored
// pause state from old to now, in tx; none when the state did not change (a
// second pause, or another host of a cluster that found the change made).
func notifyPauseChange(by Caller, tx ledger.Outbox, sub string, old, now []byte, at time.Time) error {
	paused, until := parsePause(now)
	if wasPaused, _ := parsePause(old); bytes.Equal(old, now) || (!paused && !wasPaused) {
		return nil
	}
	n := ledger.Notification{Type: ledger.NotifySubscriptionUnpaused, Time: at, Subscription: sub, Actor: by.Actor, Reason: by.Reason}
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
func storedPause(tx ledger.SubscriptionState, sub string) ([]byte, error) {
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
