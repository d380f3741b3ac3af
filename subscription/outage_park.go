package subscription

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/berthhq/berth/ledger"
)

// An aggregate can spend its budget on failures that reveal an outage and
// park before the outage is recognised: its last failure is counted by the
// detector but is not yet the Nth distinct one, and the failure that is
// comes a moment later from a neighbour. Such a park is the outage's, not
// the aggregate's, so the host takes it back: the partition watches each
// park on a spent budget while the failures that spent it are in the
// detector's window, and when the detector recognises an outage that
// counted them, the host resumes the aggregate from the event it stopped
// at — the operator's resume (a resuming record, a replay of its stream),
// by the actor "berth: outage" — with the refunded budget written in the
// same transaction. The replay then waits out the pause like every other
// aggregate, with the budget the refund left.
//
// Reverting a committed park, rather than holding a park back while an
// outage might still be recognised, keeps the ordinary park immediate (no
// park waits out a window on the chance of an outage) and every step one
// transaction: a crash before the host's resume leaves the aggregate parked,
// as after any park (the new process has seen no outage, and refunds
// nothing, for any aggregate); a crash after it finds a resuming record and
// its refunded budget, and replays. The park's notification has gone out by
// then: the "resumed" notification that follows says who took it back and
// why.

// actorOutage is the actor of the host's resume of a park an outage's
// failures made.
const actorOutage = "berth: outage"

// parkWatch is a park on a spent budget whose failures the detector
// counted: should it recognise an outage while they are in its window, the
// park is the outage's.
type parkWatch struct {
	key          aggKey
	park         uint64 // aggState.park
	version      uint64
	idx          int
	failures     int // counted against MaxAttempts at the park
	backpressure int
	charged      []charge
}

// parkRevert is a park the host takes back, with the budget the refund
// leaves it.
type parkRevert struct {
	parkWatch
	refunded int
}

// watchPark watches the park just made of the aggregate's event (version,
// idx) on a spent budget: an outage recognised since its failures were
// counted reverts it at once, one recognised while they are in the window
// reverts it then (revertParksLocked).
func (r *run) watchPark(p *partition, k aggKey, version uint64, idx int, st *attempts) {
	if len(st.charged) == 0 {
		return
	}
	w := parkWatch{key: k, version: version, idx: idx, failures: st.failures, backpressure: st.backpressure,
		charged: slices.Clone(st.charged)}
	window := r.e.opts.Systemic.Window
	now := r.e.clock.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	w.park = p.agg(k).park
	// Parks whose failures left the window can count toward no outage, and
	// the aggregate's earlier park is this one's now.
	p.parks = slices.DeleteFunc(p.parks, func(o parkWatch) bool {
		return o.key == k || now.Sub(o.charged[len(o.charged)-1].at) >= window
	})
	n, keep := p.refundsLocked(w.charged)
	if n > 0 {
		// The detector recognised the outage between the last failure and
		// the park's commit.
		p.startRevertsLocked([]parkRevert{{parkWatch: w, refunded: n}})
		return
	}
	if len(keep) > 0 {
		w.charged = keep
		p.parks = append(p.parks, w)
	}
}

// revertParksLocked takes back the watched parks whose failures the outage
// just recognised counted, and forgets the rest (too old for it, and so for
// any later one); p.mu held.
func (p *partition) revertParksLocked() {
	var reverts []parkRevert
	for _, w := range p.parks {
		if n, _ := p.refundsLocked(w.charged); n > 0 {
			reverts = append(reverts, parkRevert{parkWatch: w, refunded: n})
		}
	}
	clear(p.parks)
	p.parks = p.parks[:0]
	p.startRevertsLocked(reverts)
}

// startRevertsLocked takes the parks back, one after another in the order
// they were made, off the caller's goroutine (the ledger is written under
// the aggregates' key locks, which p.mu must not wait for); p.mu held.
func (p *partition) startRevertsLocked(reverts []parkRevert) {
	if len(reverts) == 0 {
		return
	}
	r := p.r
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for _, rv := range reverts {
			r.revertPark(p, rv)
		}
	}()
}

// revertPark takes one park back, trying again every second while the
// ledger fails (a full disk, say) until the run stops: stopped, the
// aggregate stays parked, consistently.
func (r *run) revertPark(p *partition, rv parkRevert) {
	for tries := 0; ; tries++ {
		err := r.tryRevertPark(p, rv)
		if err == nil || p.ctx.Err() != nil {
			return
		}
		if tries%60 == 0 { // said once a minute, not every second
			r.e.logger.Error("resuming a park the outage made failed; trying again every second", "subscription", r.s.name,
				"aggregate", rv.key.String(), "err", err)
		}
		if sleepReal(p.ctx) != nil {
			return
		}
	}
}

// tryRevertPark resumes the parked aggregate as an operator's Resume does,
// and records the budget the refund leaves its event in the same
// transaction, so that the replay goes on with it. An aggregate no longer
// held by that park (an operator or a long-horizon retry resumed it, and it
// may have parked again since) is left alone: every change of a park is
// made under the aggregate's key lock, held here.
func (r *run) tryRevertPark(p *partition, rv parkRevert) error {
	ctx := p.ctx
	k := rv.key
	unlock := r.s.keys.lock(k)
	defer unlock()
	p.mu.Lock()
	a := p.aggs[k]
	same := a != nil && a.mode == modeHeld && a.park == rv.park
	p.mu.Unlock()
	if !same {
		return nil
	}
	var rec *ledger.Record
	err := r.e.store.View(ctx, func(tx ledger.Tx) error {
		var err error
		rec, err = tx.Parked(r.s.name, k.typ, k.id)
		return err
	})
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		return nil
	case err != nil:
		return err
	case rec.State == ledger.StateResuming || rec.Version != rv.version || int(rec.Index) != rv.idx:
		return nil
	}
	now := r.e.clock.Now()
	failures := max(rv.failures-rv.refunded, 0)
	reason := fmt.Sprintf("its failures revealed an outage of partition %d: %d attempts refunded", p.idx, rv.refunded)
	rec.State, rec.NextRetry, rec.WaitReason = ledger.StateResuming, time.Time{}, ""
	rec.AddHistory(ledger.Entry{Time: now, Action: "resumed", Version: rec.Version, Actor: actorOutage, Reason: reason})
	budget := storedBudget{Version: rec.Version, Index: int(rec.Index), Attempts: rec.Attempts, Failures: failures,
		Backpressure: rv.backpressure, First: rec.FirstFailure, Last: rec.LastFailure, Key: recordKey(rec)}
	err = r.recordBudget(k, budget, func(put func(ledger.Tx) error) error {
		return r.withCheckpoint(ctx, p, 0, func(tx ledger.Tx) error {
			if err := tx.PutParked(rec); err != nil {
				return err
			}
			if err := put(tx); err != nil {
				return err
			}
			return tx.Notify(ledger.Notification{Type: ledger.NotifyResumed, Time: now, Subscription: r.s.name,
				AggregateType: k.typ, AggregateID: k.id, Version: rec.Version, Actor: actorOutage, By: byOutage, Reason: reason})
		})
	})
	if err != nil {
		return err
	}
	r.e.sched.remove(r.s.name, k)
	r.e.obs.resolved(r.s.name, "resume", actorOutage, rec.FirstFailure, now)
	r.e.logger.Info("parked aggregate resumed: its failures revealed the partition's outage", "subscription", r.s.name,
		"partition", p.idx, "aggregate", k.String(), "version", rec.Version, "refunded", rv.refunded, "failures", failures)
	r.beginReplay(p, k, rec.Version, int(rec.Index), recordKey(rec))
	return nil
}
