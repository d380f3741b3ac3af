package assembly

import (
	"context"
	"time"

	"github.com/berthhq/berth/internal/clock"
	"github.com/berthhq/berth/ledger"
)

// sweepEvery is how often the retention sweep runs (and once at start).
const sweepEvery = time.Hour

// sweepBatch bounds one sweep transaction.
const sweepBatch = 1000

// startRetention sweeps, at start and hourly on the host's clock, the
// resolved records older than store.resolved-retention and the audit entries
// older than store.audit-retention.
// In a cluster the sweep is a duty (cluster.go): one host sweeps the shared
// ledger, from when it takes the duty.
func (h *Host) startRetention(clock clock.Clock) {
	ctx, cancel := context.WithCancel(context.Background())
	h.stopRetention = cancel
	h.retentionWG.Go(func() { h.retain(ctx, clock) })
}

// retain sweeps at once and then hourly on clock (nil: real time) until ctx
// ends.
func (h *Host) retain(ctx context.Context, clk clock.Clock) {
	if clk == nil {
		clk = clock.Real()
	}
	// AfterFunc, not NewTimer: a clock.Fake counts NewTimer timers as the
	// engine's waiters, and this is none of the engine's.
	tick := make(chan struct{}, 1)
	for {
		h.sweep(ctx, clk.Now())
		t := clk.AfterFunc(sweepEvery, func() {
			select {
			case tick <- struct{}{}:
			default:
			}
		})
		select {
		case <-tick:
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}

// sweep removes what the retention keys say is past keeping, in bounded
// transactions; a failure (a full disk, say) waits for the next round.
func (h *Host) sweep(ctx context.Context, now time.Time) {
	cfg := h.Config().Store
	for _, s := range []struct {
		what  string
		sweep func(tx ledger.Tx) (bool, error)
	}{
		{"resolved records", func(tx ledger.Tx) (bool, error) {
			return tx.SweepResolved(now.Add(-cfg.ResolvedRetention.Std()), sweepBatch)
		}},
		{"audit entries", func(tx ledger.Tx) (bool, error) {
			return tx.SweepAudit(now.Add(-cfg.AuditRetention.Std()), sweepBatch)
		}},
	} {
		for more := true; more && ctx.Err() == nil; {
			err := h.Ledger.Update(ctx, func(tx ledger.Tx) error {
				var err error
				more, err = s.sweep(tx)
				return err
			})
			if err != nil {
				if ctx.Err() == nil {
					h.log.Warn("retention sweep failed; it runs again within the hour", "what", s.what, "error", err)
				}
				break
			}
		}
	}
}
