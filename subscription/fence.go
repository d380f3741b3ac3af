package subscription

import (
	"context"
	"errors"

	"github.com/berthhq/berth/ledger"
)

// Fencing: with several hosts on one ledger, each partition of a
// subscription is owned by one host at a time, at an epoch (Engine.Own).
// Every transaction the engine writes for a partition — checkpoints,
// parking, budgets, long-horizon retries, resume and skip, the host's
// outage resumes — goes through update, which fences it first
// (Tx.Fence): a host that lost the partition to a later claim cannot write
// for it, whatever it has in memory. A fenced transaction means exactly
// that: the partition is stopped at once (its context is cancelled, so an
// attempt in flight ends as cancelled, and nothing is retried, parked or
// charged), said once in the log and counted in Status. The partition stays
// stopped until the host is told to own it again.
//
// A single host (Options.Host empty) owns every partition and never fences.

// update runs fn in one ledger transaction for the partitions parts (none:
// a transaction of the subscription's only), fenced by each.
func (r *run) update(ctx context.Context, parts []*partition, fn func(ledger.Tx) error) error {
	host := r.e.opts.Host
	err := r.e.store.Update(ctx, func(tx ledger.Tx) error {
		if host != "" {
			for _, p := range parts {
				if err := tx.Fence(r.s.name, p.idx, host, p.epoch); err != nil {
					return err
				}
			}
		}
		return fn(tx)
	})
	if errors.Is(err, ledger.ErrFenced) && len(parts) == 1 {
		parts[0].fence(err)
	}
	return err
}

// update runs fn in one fenced ledger transaction of the partition.
func (p *partition) update(ctx context.Context, fn func(ledger.Tx) error) error {
	return p.r.update(ctx, []*partition{p}, fn)
}

// fence stops the partition: another host owns it now.
func (p *partition) fence(err error) {
	if !p.fenced.CompareAndSwap(false, true) {
		return
	}
	r := p.r
	r.s.fencings.Add(1)
	r.e.logger.Warn("partition fenced: another host owns it now; this host stopped working on it",
		"subscription", r.s.name, "partition", p.idx, "host", r.e.opts.Host, "epoch", p.epoch, "err", err)
	p.cancel()
	p.tracker.wake()
}

// isFenced reports whether the partition was fenced.
func (p *partition) isFenced() bool { return p.fenced.Load() }
