package subscription

import (
	"context"
	"fmt"
	"time"

	"github.com/berthhq/berth/ledger"
)

// begin holds the run's parked aggregates, restarts the resumes that were
// under way, and then starts the reader and the flusher. It runs beside the
// start rather than in it, so a host with many parked serves (operator
// reads, appends, other subscriptions) at once; until it ends, the run's
// partitions say StateHolding and an operator's resume or skip waits for it
// (awaitHeld). Nothing is delivered before it ends: the reader starts last.
// A failed read of the ledger is tried again after StartBackoff, for as
// long as the run lives.
func (r *run) begin() {
	defer r.wg.Done()
	e := r.e
	began := time.Now()
	var (
		resumes []*ledger.Record
		held    int
	)
	for {
		// A View after the start's Update sees at least what it saw, and
		// this host's partitions' records change only through this host,
		// which delivers nothing and lets no operator act until the end.
		err := e.store.View(r.ctx, func(tx ledger.Tx) (err error) {
			resumes, held, err = r.holdParked(tx)
			return err
		})
		if err == nil {
			break
		}
		if r.ctx.Err() != nil {
			return
		}
		n := r.s.startFailures.Add(1)
		e.logger.Warn("subscription's parked aggregates not read; trying again",
			"subscription", r.s.name, "failures", n, "err", err)
		t := e.clock.NewTimer(e.opts.StartBackoff)
		select {
		case <-t.C():
		case <-r.ctx.Done():
			t.Stop()
			return
		}
	}
	for _, rec := range resumes {
		k := aggKey{rec.AggregateType, rec.AggregateID}
		p := r.partitionOf(k)
		// A resume was under way when the engine stopped: run it again
		// from where it started; events replayed before the stop are
		// delivered again (at least once).
		p.mu.Lock()
		a := p.agg(k)
		p.setMode(a, modeReplaying)
		a.pinned = pinnedKey{rec.Version, int(rec.Index), recordKey(rec)}
		p.mu.Unlock()
		r.wg.Add(1)
		go r.replay(p, a, uint64(rec.Version), int(rec.Index))
	}
	close(r.holding)
	if held+len(resumes) > 0 {
		e.logger.Info("subscription holds its parked aggregates", "subscription", r.s.name,
			"held", held, "resuming", len(resumes), "took", time.Since(began).Round(time.Millisecond))
	}
	r.wg.Add(2)
	go r.reader()
	go r.flusher()
}

// holdParked holds the run's parked aggregates (those of partitions it
// owns) and schedules their long-horizon retries, from the ledger's index
// page by page; it returns the records of resumes under way, which the
// caller restarts, and how many it held. It may run again after a failed
// read: holding and scheduling are idempotent.
func (r *run) holdParked(tx ledger.ParkedRecords) ([]*ledger.Record, int, error) {
	s, e := r.s, r.e
	retriesUnrecoverable := s.cur.Load().parked.RetriesUnrecoverable()
	var resumes []*ledger.Record
	held := 0
	after := ""
	for {
		if err := r.ctx.Err(); err != nil {
			return nil, 0, err
		}
		page, next, err := tx.ListParkedKeys(s.name, after, 1000)
		if err != nil {
			return nil, 0, err
		}
		for _, pk := range page {
			k := aggKey{pk.AggregateType, pk.AggregateID}
			p := r.partitionOf(k)
			if p == nil {
				continue // another host's
			}
			if pk.State == ledger.StateResuming {
				rec, err := tx.Parked(s.name, k.typ, k.id)
				if err != nil {
					return nil, 0, err
				}
				resumes = append(resumes, rec)
				continue
			}
			// A long-horizon retry scheduled from an earlier page may be
			// running on another of this partition's aggregates.
			p.mu.Lock()
			p.setMode(p.agg(k), modeHeld)
			p.mu.Unlock()
			held++
			if pk.State == ledger.StateRetrying {
				at := pk.NextRetry
				if pk.Unrecoverable && !retriesUnrecoverable {
					// Parked unrecoverable by a host that retried such
					// parks: no retry is due; turn it over to an operator
					// at once (parkedRetry makes no attempt for it).
					at = e.clock.Now()
				}
				e.sched.add(s.name, k, at)
			}
		}
		if next == "" {
			return resumes, held, nil
		}
		after = next
	}
}

// awaitHeld waits until the run holds its parked aggregates (begin), so an
// operator's change to one cannot be undone by the hold that follows it.
func (r *run) awaitHeld(ctx context.Context) error {
	select {
	case <-r.holding:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: subscription %q is still holding its parked aggregates: %v", ErrBusy, r.s.name, ctx.Err())
	case <-r.ctx.Done():
		return fmt.Errorf("subscription %q: %w", r.s.name, ErrClosed)
	}
}

// holdingDone says whether begin has held the run's parked aggregates.
func (r *run) holdingDone() bool {
	select {
	case <-r.holding:
		return true
	default:
		return false
	}
}
