package webhook

import (
	"context"
	"math"
	"time"

	"github.com/berthhq/berth/ledger"
)

// HookStats describes one hook's deliveries since [New].
type HookStats struct {
	// Name is the hook's name.
	Name string
	// Delivered counts deliveries answered with 2xx.
	Delivered uint64
	// FailedAttempts counts attempts that failed: network errors, timeouts
	// and answers other than 2xx.
	FailedAttempts uint64
	// Dropped counts deliveries given up after MaxAttempts failures.
	Dropped uint64
	// Pending counts the queued notifications the hook wants and has not
	// delivered yet, the one in flight included; -1 when the ledger could
	// not be read.
	Pending int
	// Cursor is the Seq of the last notification the hook is done with.
	Cursor uint64
	// Attempts counts the failed attempts of the delivery in flight.
	Attempts int
	// NextAttempt is when the delivery in flight is tried again; zero when
	// no delivery waits.
	NextAttempt time.Time
	// LastError is the error of the last failed attempt, empty after a
	// success.
	LastError string
}

// Stats returns every configured hook's statistics, in configuration order.
// Pending is counted by reading the outbox, which costs a scan of the
// notifications not yet acknowledged.
func (d *Dispatcher) Stats() []HookStats {
	d.mu.Lock()
	ws := make([]*worker, 0, len(d.order))
	for _, name := range d.order {
		ws = append(ws, d.workers[name])
	}
	d.mu.Unlock()

	out := make([]HookStats, len(ws))
	hooks := make([]Hook, len(ws))
	loaded := make([]bool, len(ws))
	for i, w := range ws {
		out[i], hooks[i], loaded[i] = w.stats()
	}
	err := d.store.View(context.Background(), func(tx ledger.Tx) error {
		low := uint64(math.MaxUint64)
		for i := range out {
			if !loaded[i] {
				c, err := readCursor(tx, out[i].Name)
				if err != nil {
					return err
				}
				out[i].Cursor = c
			}
			out[i].Pending = 0
			low = min(low, out[i].Cursor)
		}
		if len(out) == 0 {
			return nil
		}
		const page = 1000
		for after := low; ; {
			ns, err := tx.Notifications(after, page)
			if err != nil {
				return err
			}
			for _, n := range ns {
				for i := range out {
					if n.Seq > out[i].Cursor && hooks[i].Wants(n.Type, n.Subscription) {
						out[i].Pending++
					}
				}
				after = n.Seq
			}
			if len(ns) < page {
				return nil
			}
		}
	})
	if err != nil {
		for i := range out {
			out[i].Pending = -1
		}
	}
	return out
}
