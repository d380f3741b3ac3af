package registry

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/subscription"
)

// groupCommit applies the writes of successful projection calls to the
// query store, many calls in one ledger transaction: a call hands its
// writes over and waits, and one committer takes everything waiting
// (up to the group's size) into the next transaction. The ledger runs one
// write transaction at a time whatever the number of callers, so waiting
// in a queue costs nothing a bulkhead would save, and a store that is busy
// is never the handler's failure: the call is not refused, its guest is
// not run again, and nothing is charged to its budget.
//
// Each call's part of a transaction is its writes with its event's applied
// mark (applyTx), so a delivery's writes and its mark still land together
// or not at all; a call whose reads changed is left out of the group, the
// others go on.
type groupCommit struct {
	store ledger.Store
	size  func() int // most calls in one transaction, read at each group

	mu      sync.Mutex
	queue   []*pendingApply // waiting for a transaction, in arrival order
	group   int             // calls in the group being committed
	running bool            // a committer goroutine drains the queue
}

// pendingApply is one call's writes waiting for a transaction.
type pendingApply struct {
	sub   string
	kv    *callKV
	d     *subscription.Delivery
	state applyState // guarded by groupCommit.mu
	done  chan error // buffered: the committer never waits for the caller
}

// applyState is where a call's writes are: a call may leave (its attempt
// ended) until its group's transaction decides it; from then on its
// outcome is the transaction's and it waits for it.
type applyState int

const (
	queued    applyState = iota // in the queue
	taken                       // in a group waiting for the store
	abandoned                   // its caller left; it is not applied
	decided                     // in a running transaction
)

// errAbandoned is the outcome of a call whose caller left before its
// transaction began; no one reads it.
var errAbandoned = errors.New("the call's attempt ended before its writes were applied")

// apply commits a successful call's writes with the event's mark, in the
// next group, unless the event was applied already. It waits for the
// group's transaction; when ctx ends before the call was taken into one,
// nothing is applied and the error says so. errConflict when a key the call
// read from the store has changed since.
func (g *groupCommit) apply(ctx context.Context, sub string, kv *callKV, d *subscription.Delivery) error {
	a := &pendingApply{sub: sub, kv: kv, d: d, done: make(chan error, 1)}
	g.mu.Lock()
	g.queue = append(g.queue, a)
	start := !g.running
	g.running = true
	g.mu.Unlock()
	if start {
		go g.drain()
	}
	select {
	case err := <-a.done:
		return err
	case <-ctx.Done():
	}
	if g.abandon(a) {
		return fmt.Errorf("waiting for the query store: %w; nothing was applied", context.Cause(ctx))
	}
	// In a running transaction: its outcome is known soon, and it is the
	// call's.
	return <-a.done
}

// abandon leaves a out of every transaction still to run; false when a
// running one has decided it.
func (g *groupCommit) abandon(a *pendingApply) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch a.state {
	case queued:
		g.queue = slices.DeleteFunc(g.queue, func(q *pendingApply) bool { return q == a })
	case decided:
		return false
	}
	a.state = abandoned
	return true
}

// decide marks the calls of a group whose transaction is running as its
// own, and reports which are left (not abandoned).
func (g *groupCommit) decide(group []*pendingApply) []bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	left := make([]bool, len(group))
	for i, a := range group {
		if a.state != abandoned {
			a.state, left[i] = decided, true
		}
	}
	return left
}

// waiting returns how many calls the store has yet to apply or leave out:
// those queued and those of the group being committed.
func (g *groupCommit) waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.queue) + g.group
}

// drain commits groups until the queue is empty.
func (g *groupCommit) drain() {
	for {
		g.mu.Lock()
		limit := g.size()
		if limit <= 0 {
			limit = DefaultProjectionWriters
		}
		g.group = 0 // the last group's outcomes are sent
		n := min(len(g.queue), limit)
		if n == 0 {
			g.running = false
			g.mu.Unlock()
			return
		}
		group := slices.Clone(g.queue[:n])
		g.queue = slices.Delete(g.queue, 0, n)
		for _, a := range group {
			a.state = taken
		}
		g.group = n
		g.mu.Unlock()
		g.commit(group)
	}
}

// commit applies a group in one transaction and tells each call its
// outcome. A group too big for one transaction is split in halves, each
// committed by itself, down to a call that cannot be stored alone, which
// fails alone. A call whose apply fails otherwise fails alone, and the
// others are committed again without it. A failure of the store itself
// (writes refused, the store out of reach) is every call's at once: a
// group holds up to subscription.projection-writers calls (up to 1024),
// and applying each alone would meet the store's failure once a call,
// each waiting behind the others.
func (g *groupCommit) commit(group []*pendingApply) {
	outcomes := make([]error, len(group))
	failed := -1 // the call whose apply failed the transaction
	// Not a caller's context: once taken into a transaction, a call's
	// outcome is decided by the store, and the caller waits for it.
	err := g.store.Update(context.Background(), func(tx ledger.Tx) error {
		failed = -1 // the closure may run again
		left := g.decide(group)
		for i, a := range group {
			if !left[i] {
				outcomes[i] = errAbandoned
				continue
			}
			outcomes[i] = applyTx(tx, a.sub, a.kv, a.d)
			if outcomes[i] != nil && !errors.Is(outcomes[i], errConflict) {
				failed = i
				return outcomes[i]
			}
		}
		return nil
	})
	switch {
	case err == nil:
		for i, a := range group {
			a.done <- outcomes[i]
		}
	case len(group) > 1 && errors.Is(err, ledger.ErrTooBig):
		half := len(group) / 2
		g.commit(group[:half])
		g.commit(group[half:])
	case len(group) > 1 && failed >= 0:
		group[failed].done <- err
		g.commit(slices.Delete(slices.Clone(group), failed, failed+1))
	default:
		for _, a := range group {
			a.done <- err
		}
	}
}
