package subscription

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// run is one subscription's delivery over the partitions this host owns,
// each from its own checkpoint: the reader, the partitions and their
// checkpoint trackers. Reset, and a change of the partitions owned
// (Engine.Own), replace it.
type run struct {
	s      *subscription
	e      *Engine
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// parts has a place for every partition of the subscription: nil for
	// those another host owns. owned lists the others in index order, and
	// all says owned is every partition.
	parts    []*partition
	owned    []*partition
	all      bool
	flushReq chan struct{}
	pending  atomic.Int64  // positions finished since the last flush
	budgets  budgetHints   // which aggregates may have a spent budget recorded
	parks    atomic.Uint64 // the parks made, numbering them (aggState.park)
	// subDurable is the subscription's checkpoint as last written (or read
	// at the start); cpMu held.
	subDurable uint64
	// holding is closed once the run's parked aggregates are held (begin):
	// an operator's call waits for it, and partitions say "holding" until.
	holding chan struct{}
	// fresh is the first position appended after the run started (the
	// log's head then, plus one): no earlier run, on this host or another,
	// can have attempted an event from there on (Delivery.Fresh).
	fresh uint64
}

// newRun returns a run over the partitions of starts (partition → its
// checkpoint and the epoch it is owned at); sub is the subscription's stored
// checkpoint.
func newRun(s *subscription, starts map[int]partStart, sub uint64) *run {
	ctx, cancel := context.WithCancel(s.e.ctx)
	r := &run{s: s, e: s.e, ctx: ctx, cancel: cancel, flushReq: make(chan struct{}, 1), subDurable: sub,
		holding: make(chan struct{})}
	r.parts = make([]*partition, s.e.opts.Partitions)
	for i := range r.parts {
		st, ok := starts[i]
		if !ok {
			continue
		}
		r.parts[i] = newPartition(r, i, st)
		r.owned = append(r.owned, r.parts[i])
	}
	r.all = len(r.owned) == len(r.parts)
	return r
}

// lowWater returns the lowest in-memory checkpoint of the live partitions;
// ok is false when there is none.
func (r *run) lowWater() (lw uint64, ok bool) {
	for _, p := range r.owned {
		if p.isFenced() {
			continue
		}
		if l := p.tracker.lowWater(); !ok || l < lw {
			lw, ok = l, true
		}
	}
	return lw, ok
}

// reader reads the log from the lowest checkpoint of the partitions owned,
// in order, and hands each commit to its aggregate's partition; the commits
// of partitions another host owns (or this one lost), those below their
// partition's checkpoint, and those with no event of interest are passed
// over at once.
func (r *run) reader() {
	defer r.wg.Done()
	pos, ok := r.lowWater()
	if !ok {
		<-r.ctx.Done() // nothing owned: nothing to read
		return
	}
	batch := r.e.opts.ReadBatch
	for {
		if err := r.s.gate.wait(r.ctx); err != nil {
			return
		}
		n, err := r.waitRoom(r.ctx, r.e.opts.MaxInFlight)
		if err != nil {
			return
		}
		limit := min(batch, r.e.opts.MaxInFlight-n)
		commits, err := r.e.events.Read(r.ctx, pos, limit)
		if err != nil {
			if r.ctx.Err() != nil {
				return
			}
			r.e.logger.Error("reading the event log failed", "subscription", r.s.name, "position", pos, "err", err)
			if sleepReal(r.ctx) != nil {
				return
			}
			continue
		}
		if len(commits) == 0 {
			if err := r.e.events.Wait(r.ctx, pos-1); err != nil {
				if r.ctx.Err() != nil {
					return
				}
				r.e.logger.Error("waiting on the event log failed", "subscription", r.s.name, "err", err)
				if sleepReal(r.ctx) != nil {
					return
				}
			}
			continue
		}
		cur := r.s.cur.Load()
		for i := range commits {
			c := commits[i]
			pos = c.Position + 1
			k := aggKey{c.AggregateType, c.AggregateID}
			p := r.partitionOf(k)
			if p == nil || p.isFenced() || !cur.wantsAny(&c, 0) || !p.tracker.register(c.Position) {
				continue // readTo below counts it finished for p
			}
			p.dispatch(k, c)
		}
		for _, p := range r.owned {
			p.tracker.readTo(pos)
		}
	}
}

// storeRetryPause is how long the engine waits, in real time, before it
// reads the event log or writes the ledger again after it failed (a full
// disk, a store that cannot answer): the log says "every second". These are
// retries of the engine's stores behind their interfaces (either backend),
// not of NATS requests, which the JetStream stores ask again themselves
// (jsapi.Retry) before they fail.
const storeRetryPause = time.Second

// sleepReal waits storeRetryPause of real time: used only to pace retries
// of the engine's own I/O errors, which are not part of the failure model
// under test.
func sleepReal(ctx context.Context) error {
	t := time.NewTimer(storeRetryPause)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
