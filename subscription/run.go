package subscription

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// run is one subscription's delivery from one starting point: the reader,
// the partitions and the checkpoint tracker. Reset replaces it.
type run struct {
	s        *subscription
	e        *Engine
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	tracker  *tracker
	parts    []*partition
	flushReq chan struct{}
	budgets  budgetHints   // which aggregates may have a spent budget recorded
	parks    atomic.Uint64 // the parks made, numbering them (aggState.park)
}

func newRun(s *subscription, from uint64) *run {
	ctx, cancel := context.WithCancel(s.e.ctx)
	r := &run{s: s, e: s.e, ctx: ctx, cancel: cancel, tracker: newTracker(from), flushReq: make(chan struct{}, 1)}
	r.parts = make([]*partition, s.e.opts.Partitions)
	for i := range r.parts {
		r.parts[i] = newPartition(r, i)
	}
	return r
}

// reader reads the log from the checkpoint, in order, and hands each commit
// to its aggregate's partition; commits with no event of interest are passed
// over at once.
func (r *run) reader() {
	defer r.wg.Done()
	pos := r.tracker.lowWater()
	batch := r.e.opts.ReadBatch
	for {
		if err := r.s.gate.wait(r.ctx); err != nil {
			return
		}
		if err := r.tracker.waitRoom(r.ctx, r.e.opts.MaxInFlight); err != nil {
			return
		}
		n, _ := r.tracker.inFlight()
		limit := min(batch, r.e.opts.MaxInFlight-n)
		commits, err := r.e.events.Read(r.ctx, pos, limit)
		if err != nil {
			if r.ctx.Err() != nil {
				return
			}
			r.e.logger.Error("reading the event log failed", "subscription", r.s.name, "position", pos, "err", err)
			if sleepReal(r.ctx, time.Second) != nil {
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
				if sleepReal(r.ctx, time.Second) != nil {
					return
				}
			}
			continue
		}
		cur := r.s.cur.Load()
		for i := range commits {
			c := commits[i]
			r.tracker.register(c.Position)
			pos = c.Position + 1
			if !cur.wantsAny(&c, 0) {
				r.finished(c.Position)
				continue
			}
			k := aggKey{c.AggregateType, c.AggregateID}
			r.partitionOf(k).dispatch(k, c)
		}
	}
}

// sleepReal waits d of real time: used only to pace retries of the engine's
// own I/O errors, which are not part of the failure model under test.
func sleepReal(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
