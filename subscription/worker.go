package subscription

import "github.com/berthhq/berth/eventlog"

// Workers are the goroutines that deliver live aggregates, one aggregate at
// a time, each holding a slot (partition.go). A worker outlives the
// aggregate it was started for: when it gives its slot back it goes on with
// the ready aggregate the slot goes to, and with none it waits, holding no
// slot, for the partition to hand it the next aggregate it gives a slot to
// (idle). Goroutines cost a start and the growth of their stack into the
// depth of a delivery; with a goroutine per aggregate given a slot, that
// was nearly a quarter of the engine's CPU per event (docs/BENCHMARKS.md).
//
// At most max workers of a partition wait at once (idle plus those handed
// an aggregate they have not taken yet, so that handoff, of capacity max,
// never blocks); the others end. Waiting workers end with the run.

// startLocked gives a a slot and a worker; p.mu held.
func (p *partition) startLocked(a *aggState) {
	a.running = true
	p.running++
	p.runLocked(a)
}

// runLocked gives a, which holds a slot, a worker: a waiting one, else a
// new one; p.mu held.
func (p *partition) runLocked(a *aggState) {
	if p.idle > 0 {
		p.idle--
		p.handoff <- a // never blocks: a place per waiting worker
		return
	}
	p.r.wg.Add(1)
	go p.work(a)
}

// fill starts ready aggregates while slots are free; p.mu held.
func (p *partition) fill() {
	for a := p.takeReady(); a != nil; a = p.takeReady() {
		p.runLocked(a)
	}
}

// takeReady gives the slot fill would start the first ready aggregate in
// to that aggregate and returns it, or returns nil while no slot is free or
// none is ready; p.mu held. The caller runs it: fill in a worker of its
// own, a worker that has just given its own slot back in itself (work).
func (p *partition) takeReady() *aggState {
	for p.running+p.slotWaiters < p.limit && len(p.ready) > 0 {
		a := p.ready[0]
		p.ready[0] = nil
		p.ready = p.ready[1:]
		a.queued = false
		if a.mode == modeLive && len(a.queue) > 0 && !a.running {
			a.running = true
			p.running++
			return a
		}
		p.forget(a)
	}
	return nil
}

// waitLocked reports whether a worker with nothing to deliver should wait
// for the next aggregate rather than end, and counts it idle if so; p.mu
// held.
func (p *partition) waitLocked() bool {
	if p.ctx.Err() != nil || p.idle+len(p.handoff) >= p.max {
		return false
	}
	p.idle++
	return true
}

// awaitHandoff waits for the aggregate the partition hands a waiting
// worker, with its slot; nil when the run stops. An aggregate handed over
// as the run stops stays running with nobody to deliver it, as it would in
// a worker that stopped at its first look: the run is over.
func (p *partition) awaitHandoff() *aggState {
	select {
	case a := <-p.handoff:
		return a
	case <-p.ctx.Done():
		return nil
	}
}

// work handles an aggregate's queued commits in order while it holds a slot.
// It yields the slot after each commit when others wait, so that one busy
// aggregate cannot starve its neighbours; then it goes on with the
// aggregate the slot went to, or waits for one.
func (p *partition) work(a *aggState) {
	defer p.r.wg.Done()
	for handled := 0; ; handled++ {
		p.mu.Lock()
		if a.mode != modeLive || len(a.queue) == 0 || p.ctx.Err() != nil ||
			p.running > p.limit || (handled > 0 && (len(p.ready) > 0 || p.slotWaiters > 0)) {
			a.running = false
			p.running--
			p.slotFreedLocked()
			if a.mode == modeLive && len(a.queue) > 0 && p.ctx.Err() == nil {
				a.queued = true
				p.ready = append(p.ready, a)
			}
			next := p.takeReady()
			p.fill()
			p.forget(a)
			wait := next == nil && p.waitLocked()
			p.mu.Unlock()
			if wait {
				next = p.awaitHandoff()
			}
			if next == nil {
				return
			}
			a, handled = next, -1
			continue
		}
		c := a.queue[0]
		a.queue[0] = eventlog.Commit{}
		a.queue = a.queue[1:]
		p.mu.Unlock()

		switch p.r.handleCommit(p, a, c, 0, true) {
		case outcomeHandled:
			p.finished(c.Position)
		case outcomeParked:
			// park finished the position and made the aggregate held.
		case outcomeCancelled:
			p.mu.Lock()
			a.running = false
			p.running--
			p.slotFreedLocked()
			p.mu.Unlock()
			return
		}
	}
}
