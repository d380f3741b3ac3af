package subscription

import (
	"time"
)

// writeChecker is what a ledger.Store may also offer: whether it refuses
// writes now (the Badger ledger, while the data directory is below its
// free-space reserve or gone).
type writeChecker interface{ CheckWrite() error }

// storeRefuses returns why the ledger refuses writes now; nil when it takes
// them or cannot tell.
func (e *Engine) storeRefuses() error {
	if c, ok := e.store.(writeChecker); ok {
		return c.CheckWrite()
	}
	return nil
}

// pausedForStore takes a failed attempt for systemic while the ledger
// refuses writes: the failure could be neither counted durably nor parked,
// and a full disk is the host's outage, not the aggregate's. So the
// partition pauses (a failed probe keeps it paused, with a longer wait), no
// aggregate spends its budget, and the event is tried again until the
// ledger takes writes; nothing is skipped. It reports whether it did so.
// Once the ledger takes writes again, a pause it caused ends at the next
// failure (or success), and failures count again: a handler that fails on
// its own is parked as usual rather than holding the partition paused.
func (r *run) pausedForStore(p *partition, now time.Time, probe bool) bool {
	err := r.e.storeRefuses()
	if err == nil {
		p.endStorePause()
		return false
	}
	if probe {
		p.probeDone(false)
	}
	p.enterStorePause(now, "the ledger cannot write: "+err.Error())
	return true
}

// enterStorePause pauses the partition for the ledger, unless it is paused
// already (for an outage, which keeps its own end).
func (p *partition) enterStorePause(now time.Time, reason string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused {
		return
	}
	p.paused, p.storePaused = true, true
	p.pausedSince = now
	p.pauseReason = reason
	p.probeFailures = 0
	p.r.e.logger.Warn("partition paused: the ledger cannot write", "subscription", p.r.s.name, "partition", p.idx, "reason", reason)
}

// endStorePause ends a pause the ledger caused.
func (p *partition) endStorePause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused && p.storePaused {
		p.unpauseLocked()
	}
}
