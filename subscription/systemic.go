package subscription

import (
	"context"
	"fmt"
	"time"

	"github.com/berthhq/berth/internal/clock"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/retry"
)

// awaitTurn blocks while the subscription is paused, and while the partition
// is in a systemic pause; then exactly one waiter becomes the probe, after
// the probe backoff. It returns whether the caller's next attempt is that
// probe. An outage the detector recognises while the caller waits for an
// operator's unpause calls onOutage.
func (p *partition) awaitTurn(ctx context.Context, pol *retry.Policy, onOutage func()) (probe bool, err error) {
	clk := p.r.e.clock
	for {
		if err := p.waitGate(ctx, onOutage); err != nil {
			return false, err
		}
		p.mu.Lock()
		if !p.paused {
			p.mu.Unlock()
			return false, nil
		}
		if !p.probing {
			p.probing = true
			d := pol.Backoff(p.probeFailures + 1)
			p.nextProbe = clk.Now().Add(d)
			p.mu.Unlock()
			if err := clock.Sleep(ctx, clk, d); err != nil {
				p.probeDone(false)
				return false, err
			}
			return true, nil
		}
		ch := p.changed
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

// notifyLocked wakes waiters on the pause state; p.mu held.
func (p *partition) notifyLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// enterSystemic pauses the partition.
func (p *partition) enterSystemic(now time.Time, reason string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.enterSystemicLocked(now, reason)
}

// enterSystemicLocked pauses the partition and reports whether it was
// running; p.mu held.
func (p *partition) enterSystemicLocked(now time.Time, reason string) bool {
	if p.paused {
		return false
	}
	p.paused = true
	p.pausedSince = now
	p.pauseReason = reason
	p.probeFailures = 0
	p.r.e.logger.Warn("partition paused: systemic failure", "subscription", p.r.s.name, "partition", p.idx, "reason", reason)
	p.noteOutageLocked(ledger.NotifyPartitionPaused, now, reason)
	return true
}

// pauseEndedSince reports whether a systemic pause ended after t: an
// attempt begun at t failed during it, or while the failures that made
// it ran, and its failure is that outage's.
func (p *partition) pauseEndedSince(t time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.resumedAt.After(t)
}

// isPaused reports whether the partition is in a systemic pause.
func (p *partition) isPaused() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused
}

// probeDone ends a probe; a failed probe keeps the pause and lengthens the
// next wait.
func (p *partition) probeDone(ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.probing = false
	if ok {
		p.unpauseLocked()
		return
	}
	if p.paused {
		p.probeFailures++
	}
	p.notifyLocked()
}

func (p *partition) unpauseLocked() {
	if p.paused {
		p.r.e.logger.Info("partition resumed after systemic pause", "subscription", p.r.s.name, "partition", p.idx,
			"probes", p.probeFailures+1)
		if !p.storePaused { // a pause for the ledger was never notified: it could not be written
			p.noteOutageLocked(ledger.NotifyPartitionResumed, p.r.e.clock.Now(), "")
		}
		p.paused = false
		p.resumedAt = p.r.e.clock.Now()
		p.storePaused = false
		p.probeFailures = 0
		p.nextProbe = time.Time{}
		// Start counting afresh: the failures that made the pause are over.
		p.detector.Reset()
	}
	p.notifyLocked()
}

// succeeded records a successful attempt: it ends a systemic pause, raises
// concurrency lowered by backpressure by one, and clears the aggregate from
// the systemic window.
func (p *partition) succeeded(agg string, now time.Time, probe bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.detector.Success(agg, now)
	if probe {
		p.probing = false
	}
	if p.paused || probe {
		p.unpauseLocked()
	}
	if p.limit < p.max {
		p.limit++
		p.slotFreedLocked()
		p.fill()
	}
}

// failed records a recoverable failure in the systemic window. When it
// makes the failure systemic, the partition pauses in the same step (so
// that no failure is charged in between) and failed reports true; else it
// returns the charge the failure is, for a refund should it turn out to
// have revealed an outage (outage.go).
func (p *partition) failed(agg string, now time.Time) (bool, charge) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.detector.Failure(agg, now) {
		w := p.r.e.opts.Systemic
		p.detectedOutageLocked(now, fmt.Sprintf("%d aggregates of the partition failing within %s", w.Aggregates, w.Window))
		return true, charge{}
	}
	return false, charge{at: now, epoch: p.outages}
}
