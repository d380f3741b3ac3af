package subscription

import (
	"context"
	"sync"
)

// tracker knows which positions of one partition read from the log are
// finished. With several aggregates handled at once, commits finish out of
// order, so the partition's checkpoint is its lowest position not yet
// finished: every commit of the partition below it was handled, passed over,
// or held for a parked aggregate. Positions are registered in log order, and
// the positions in between (other partitions' commits, and those the handler
// does not want) count as finished, so a sliding window of flags suffices.
// The reader brings every partition's window up to where it has read
// (readTo), so the longest window is the subscription's: the commits read
// since the lowest unfinished one.
type tracker struct {
	mu   sync.Mutex
	base uint64 // lowest unfinished position (== next when none is in flight)
	done []bool // done[i] is position base+i
	// buf is done's backing array from its start, reused when the window
	// empties: a partition's window empties whenever its commits in
	// flight are done, which is often, and must not cost a new array each
	// time (unless it grew large).
	buf     []bool
	next    uint64 // next position to register
	written uint64 // the durable checkpoint
	// changed is closed when the window moves; made only when someone waits
	// for that (inFlight), so that a window moving with nobody waiting, as
	// it does at every finished commit, makes no channel.
	changed chan struct{}
}

func newTracker(from uint64) *tracker {
	return &tracker{base: from, next: from, written: from}
}

// register adds a position read from the log and reports whether it is the
// partition's to deliver: a position below next is below the partition's
// checkpoint (the reader starts at the lowest of the partitions') and was
// handled before.
func (t *tracker) register(pos uint64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if pos < t.next {
		return false
	}
	t.fillLocked(pos)
	t.push(false)
	t.next = pos + 1
	return true
}

// push appends a flag to the window; t.mu held.
func (t *tracker) push(done bool) {
	c := cap(t.done)
	t.done = append(t.done, done)
	if cap(t.done) != c {
		t.buf = t.done[:0] // a new array, starting at done[0]
	}
}

// maxKeptWindow is the longest window array kept for reuse once empty.
const maxKeptWindow = 1024

// readTo counts every position below next not registered as finished: the
// reader has read them, and they are not this partition's.
func (t *tracker) readTo(next uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.fillLocked(next)
}

// fillLocked marks the positions from t.next up to (not including) pos
// finished; t.mu held.
func (t *tracker) fillLocked(pos uint64) {
	if pos <= t.next {
		return
	}
	if len(t.done) == 0 {
		// Nothing in flight: the checkpoint jumps, with no flags to keep.
		t.base, t.next = pos, pos
		t.notifyLocked()
		return
	}
	for t.next < pos {
		t.push(true)
		t.next++
	}
}

// finish marks pos finished and reports whether it was in flight.
func (t *tracker) finish(pos uint64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if pos < t.base || pos >= t.next {
		return false
	}
	t.done[pos-t.base] = true
	t.advance()
	return true
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
		if cap(t.buf) <= maxKeptWindow {
			t.done = t.buf[:0]
		} else {
			t.done, t.buf = nil, nil // let a large array go
		}
	}
	t.notifyLocked()
}

// notifyLocked wakes those waiting for the window to move; t.mu held.
func (t *tracker) notifyLocked() {
	if t.changed != nil {
		close(t.changed)
		t.changed = nil
	}
}

// wake wakes those waiting for the window to move without moving it: the
// partition was fenced, and the reader stops waiting for it.
func (t *tracker) wake() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.notifyLocked()
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

// inFlight returns the number of positions in the window and a channel
// closed when the window next moves.
func (t *tracker) inFlight() (int, <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.changed == nil {
		t.changed = make(chan struct{})
	}
	return len(t.done), t.changed
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
}

// waitRoom blocks while a live partition's window holds limit or more
// positions, so that a stalled partition cannot make the reader hold the
// whole log in memory, and returns the longest window.
func (r *run) waitRoom(ctx context.Context, limit int) (int, error) {
	for {
		longest, full := 0, (<-chan struct{})(nil)
		for _, p := range r.owned {
			if p.isFenced() {
				continue
			}
			n, ch := p.tracker.inFlight()
			longest = max(longest, n)
			if n >= limit && full == nil {
				full = ch
			}
		}
		if full == nil {
			return longest, nil
		}
		select {
		case <-full:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}
