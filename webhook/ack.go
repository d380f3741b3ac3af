package webhook

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/berthhq/berth/ledger"
)

// runFence returns the fence of the running Run.
func (d *Dispatcher) runFence() ledger.DutyFence {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.fence
}

// checkFenced ends the running Run if err says the ledger refused a write
// for its fence (another host claimed the webhooks duty), and reports
// whether it did.
func (d *Dispatcher) checkFenced(err error) bool {
	if !errors.Is(err, ledger.ErrFenced) {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fenced == nil && d.cancel != nil {
		d.fenced = err
		d.cancel()
		d.log.Warn("webhook: the webhooks duty moved to another host; sending nothing more here", "error", err)
	}
	return true
}

// ack removes the outbox entries every configured hook is done with: up to
// the smallest durable cursor, or all of them when no hook is configured. A
// read-only look comes first, so that the ledger's writers are not held up
// when there is nothing to remove.
func (d *Dispatcher) ack(ctx context.Context) error {
	for ctx.Err() == nil {
		var oldest, target uint64
		err := d.store.View(ctx, func(tx ledger.Tx) (err error) {
			oldest, target, err = d.ackRange(tx)
			return err
		})
		if err != nil || oldest == 0 || oldest > target {
			return err
		}
		var through uint64
		fence := d.runFence()
		err = d.store.Update(ctx, func(tx ledger.Tx) error {
			if err := fence.Check(tx); err != nil {
				return err
			}
			oldest, target, err := d.ackRange(tx)
			if err != nil || oldest == 0 || oldest > target {
				return err
			}
			through = min(target, oldest+ackChunk-1)
			return tx.AckNotifications(through)
		})
		if d.checkFenced(err) || err != nil || through == 0 || through >= target {
			return err
		}
	}
	return nil
}

// ackReader is what ackRange reads: the outbox and the hooks' cursors.
type ackReader interface {
	ledger.Outbox
	ledger.SubscriptionState
}

// ackRange returns the Seq of the oldest queued notification (0 when the
// outbox is empty) and the Seq through which every hook is done.
func (d *Dispatcher) ackRange(tx ackReader) (oldest, target uint64, err error) {
	ns, err := tx.Notifications(0, 1)
	if err != nil || len(ns) == 0 {
		return 0, 0, err
	}
	d.mu.Lock()
	names := slices.Clone(d.order)
	d.mu.Unlock()
	target = math.MaxUint64
	for _, name := range names {
		c, err := readCursor(tx, name)
		if err != nil {
			return 0, 0, err
		}
		target = min(target, c)
	}
	return ns[0].Seq, target, nil
}

func cursorKey(name string) string { return "cursor/" + name }

// readCursor returns the hook's durable cursor, 0 when none is stored.
func readCursor(tx ledger.SubscriptionState, name string) (uint64, error) {
	v, err := tx.Meta(CursorSubscription, cursorKey(name))
	if errors.Is(err, ledger.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	c, err := strconv.ParseUint(string(v), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("webhook: corrupt cursor of hook %q: %q", name, v)
	}
	return c, nil
}

func writeCursor(tx ledger.SubscriptionState, name string, c uint64) error {
	return tx.SetMeta(CursorSubscription, cursorKey(name), strconv.AppendUint(nil, c, 10))
}
