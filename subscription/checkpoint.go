package subscription

import (
	"context"
	"sync"
	"time"

	"github.com/berthhq/berth/ledger"
)

// tracker knows which positions read from the log are finished. With several
// aggregates handled at once, commits finish out of order, so the checkpoint
// is the lowest position not yet finished: every commit below it was handled,
// passed over, or held for a parked aggregate. Positions are registered in
// log order (the log has no gaps), so a sliding window of flags suffices.
type tracker struct {
	mu      sync.Mutex
	base    uint64 // lowest unfinished position (== next when none is in flight)
	done    []bool // done[i] is position base+i
	next    uint64 // next position to register
	pending int    // positions finished since the last flush
	written uint64 // the durable checkpoint
	changed chan struct{}
}

func newTracker(from uint64) *tracker {
	return &tracker{base: from, next: from, written: from, changed: make(chan struct{})}
}

// register adds the next position read from the log.
func (t *tracker) register(pos uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	// A log without gaps registers next; should a position be missing, the
	// ones skipped cannot be delivered, so they count as finished.
	for t.next < pos {
		t.done = append(t.done, true)
		t.next++
	}
	t.done = append(t.done, false)
	t.next = pos + 1
	t.advance()
}

// finish marks pos finished and reports whether a flush is worth doing.
func (t *tracker) finish(pos uint64, flushEvery int) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if pos < t.base || pos >= t.next {
		return false
	}
	t.done[pos-t.base] = true
	t.pending++
	t.advance()
	return t.pending >= flushEvery
}

func (t *tracker) advance() {
	n := 0
	for n < len(t.done) && t.done[n] {
		n++
	}
	if n == 0 {
		return
	}
	t.done = t.done[n:]
	t.base += uint64(n)
	if len(t.done) == 0 {
		t.done = t.done[:0:0] // let the old backing array go
	}
	close(t.changed)
	t.changed = make(chan struct{})
}

// lowWater returns the in-memory checkpoint.
func (t *tracker) lowWater() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.base
}

// lowWaterWith returns what the checkpoint would be with pos finished too.
func (t *tracker) lowWaterWith(pos uint64) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if pos != t.base {
		return t.base
	}
	n := 1
	for n < len(t.done) && t.done[n] {
		n++
	}
	return t.base + uint64(n)
}

// inFlight returns the number of registered, unfinished-window positions and
// a channel closed when the window next moves.
func (t *tracker) inFlight() (int, <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.done), t.changed
}

// waitRoom blocks while max or more positions are in the window, so that a
// stalled partition cannot make the reader hold the whole log in memory.
func (t *tracker) waitRoom(ctx context.Context, max int) error {
	for {
		n, ch := t.inFlight()
		if n < max {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// withCheckpoint runs fn in one ledger transaction together with the
// checkpoint as it stands with pos finished (pos 0: as it stands). A park,
// resume or skip thus moves the checkpoint atomically with the ledger change
// that makes the move safe: the checkpoint never passes a held commit whose
// record is not durable. pos is marked finished only once the transaction has
// committed; cpMu keeps a concurrent flush from writing past it meanwhile.
func (r *run) withCheckpoint(ctx context.Context, pos uint64, fn func(ledger.Tx) error) error {
	r.s.cpMu.Lock()
	defer r.s.cpMu.Unlock()
	lw := r.tracker.lowWater()
	if pos != 0 {
		lw = r.tracker.lowWaterWith(pos)
	}
	write := lw > r.tracker.durable()
	err := r.e.store.Update(ctx, func(tx ledger.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		if write {
			return tx.SetCheckpoint(r.s.name, lw)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if write {
		r.tracker.setDurable(lw)
	}
	if pos != 0 {
		r.tracker.finish(pos, int(^uint(0)>>1))
	}
	return nil
}

func (t *tracker) durable() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.written
}

func (t *tracker) setDurable(p uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p > t.written {
		t.written = p
	}
	t.pending = 0
}

// flush writes the in-memory checkpoint if it moved.
func (r *run) flush(ctx context.Context) error {
	r.s.cpMu.Lock()
	defer r.s.cpMu.Unlock()
	lw := r.tracker.lowWater()
	if lw <= r.tracker.durable() {
		return nil
	}
	if err := r.e.store.Update(ctx, func(tx ledger.Tx) error {
		return tx.SetCheckpoint(r.s.name, lw)
	}); err != nil {
		return err
	}
	r.tracker.setDurable(lw)
	return nil
}

// finished marks a live position finished, asking the flusher for a write
// when enough have piled up since the last one.
func (r *run) finished(pos uint64) {
	if r.tracker.finish(pos, r.e.opts.CheckpointEvery) {
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
