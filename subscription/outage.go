package subscription

import (
	"context"
	"time"
)

// The failures that reveal an outage are charged before it is recognised:
// the first aggregates of a partition to fail look like ordinary recoverable
// failures, and only the Nth distinct one within the systemic window makes
// the partition pause. No aggregate spends its budget during a systemic
// failure (docs/failure-model.md, section 3), so when the detector recognises an outage, the attempts
// those earlier failures were charged are refunded — in memory and in the
// budget the ledger keeps — and a long outage that began with
// ordinary-looking failures cannot park them early.
//
// The partition counts the outages its detector recognised (an epoch) and
// signals each one; a charge remembers the epoch it was made in. Each
// aggregate's deliver loop owns its budget, so it refunds itself: the
// signal wakes it in its backoff (which then goes on), while it waits for a
// slot or for an operator's unpause, and an attempt in flight refunds as
// soon as it ends. A refund gives back the charges made before the outage was
// recognised and within the window that recognised it — the failures the
// detector counted — and nothing charged since. A partition paused by a
// failure that is systemic by itself (a refused connection, a guest's
// report) refunds nothing: there, the outage was not revealed by the
// failures before it.
//
// An aggregate whose budget those failures spent has parked by the time the
// outage is recognised, with no deliver loop left to refund it: the host
// takes such a park back and resumes the aggregate with the refund
// (outage_park.go).

// charge is a recoverable failure counted against the budget that the
// detector also counted toward an outage.
type charge struct {
	at    time.Time
	epoch uint64 // the partition's outages when it was charged
}

// detectedOutageLocked pauses the partition as systemic because its
// detector recognised an outage at now, signals the aggregates to refund,
// and takes back the parks the outage's failures made; p.mu held.
func (p *partition) detectedOutageLocked(now time.Time, reason string) {
	if !p.enterSystemicLocked(now, reason) {
		return
	}
	p.outages++
	p.outageAt = now
	close(p.outageCh)
	p.outageCh = make(chan struct{})
	p.revertParksLocked()
}

// outageSignal returns a channel closed when the detector next recognises
// an outage.
func (p *partition) outageSignal() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.outageCh
}

// refundable removes from st the charges the latest recognised outage
// refunds and returns how many.
func (p *partition) refundable(st *attempts) int {
	if len(st.charged) == 0 {
		return 0
	}
	p.mu.Lock()
	n, keep := p.refundsLocked(st.charged)
	p.mu.Unlock()
	clear(st.charged[len(keep):])
	st.charged = keep
	return n
}

// refundsLocked splits charged by the latest recognised outage: n are
// refunded, and keep (charged[:len(keep)], reused) are the charges made since
// it, which a later outage may refund; p.mu held.
func (p *partition) refundsLocked(charged []charge) (n int, keep []charge) {
	window := p.r.e.opts.Systemic.Window
	keep = charged[:0]
	for _, c := range charged {
		switch {
		case c.epoch < p.outages && p.outageAt.Sub(c.at) < window:
			n++ // revealed the outage: refunded
		case c.epoch < p.outages:
			// Too old to have counted toward it, or toward any later one.
		default:
			keep = append(keep, c)
		}
	}
	return n, keep
}

// refundOutage gives back the attempts charged to the aggregate's event by
// the failures that revealed the partition's latest outage, and records the
// budget so refunded in the ledger.
func (r *run) refundOutage(p *partition, a *aggState, version uint64, idx int, st *attempts) {
	n := p.refundable(st)
	if n == 0 {
		return
	}
	st.failures = max(st.failures-n, 0)
	r.saveBudget(p, a.key, version, idx, st)
	r.e.logger.Info("attempts refunded: they revealed the partition's outage", "subscription", r.s.name,
		"partition", p.idx, "aggregate", a.key.String(), "version", version, "refunded", n, "failures", st.failures)
}

// waitGate waits while the subscription is paused by an operator; an outage
// recognised meanwhile calls onOutage.
func (p *partition) waitGate(ctx context.Context, onOutage func()) error {
	for {
		if p.r.s.gate.isOpen() {
			// Nothing to wait for (every attempt comes here): no outage
			// signal to take, no select.
			onOutage()
			return ctx.Err()
		}
		outage := p.outageSignal()
		onOutage() // one recognised before the signal was taken
		select {
		case <-p.r.s.gate.opened():
			return ctx.Err()
		case <-outage:
			onOutage()
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// backoff sleeps d on the clock, or until ctx ends. An outage recognised
// meanwhile calls onOutage, and the sleep goes on: a backoff (or a
// Retry-After) is not cut short, and the partition's pause holds the next
// attempt back anyway.
func (p *partition) backoff(ctx context.Context, d time.Duration, onOutage func()) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := p.r.e.clock.NewTimer(d)
	defer t.Stop()
	for {
		outage := p.outageSignal()
		onOutage() // one recognised before the signal was taken
		select {
		case <-t.C():
			return nil
		case <-outage:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
