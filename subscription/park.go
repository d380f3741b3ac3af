package subscription

import (
	"errors"
	"log/slog"
	"time"

	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/retry"
)

// park records the aggregate as parked at event idx of c and holds its later
// events. The record, the "parked" notification and the checkpoint moving
// past c are one transaction: after a crash either all of it happened (the
// aggregate is held, its later commits are read from its stream on resume)
// or none (c is delivered again). A park during a replay updates the
// aggregate's record, keeping its history. It builds the record
// (parkedRecord), writes it (writePark) and holds the aggregate (hold).
func (r *run) park(p *partition, a *aggState, c eventlog.Commit, idx int, live bool, st *attempts, f *retry.Failure, d retry.Decision) outcome {
	unlock := r.s.keys.lock(a.key)
	defer unlock()
	now := r.e.clock.Now()
	cur := r.s.cur.Load()
	info := errorInfo(f, d)
	var pos uint64
	if live {
		pos = c.Position
	}
	rec, ok := r.writePark(p, a.key, pos, st, f.Capsule, now, func(old *ledger.Record) *ledger.Record {
		return r.parkedRecord(old, a.key, c, idx, st, info, d, cur, now)
	})
	if !ok {
		return outcomeCancelled
	}
	r.e.obs.parked(r.s.name)
	r.e.storm.Log(slog.LevelInfo, "aggregate parked", "subscription", r.s.name, "aggregate", a.key.String(),
		"version", c.Version, "index", idx, "class", info.Kind, "attempts", st.n, "reason", d.Reason,
		"state", rec.State, "waitReason", rec.WaitReason)
	if st.stored {
		r.forgetBudget(p, a.key, false) // the park removed the budget itself
		st.stored = false
	}
	r.hold(p, a)
	if rec.State == ledger.StateRetrying {
		r.e.sched.add(r.s.name, a.key, rec.NextRetry)
	}
	return outcomeParked
}

// parkedRecord is aggregate k's record parked at event idx of c after the
// attempts st, the last failing with info classified as d: old updated
// (a park during a replay), or a new record when old is nil.
func (r *run) parkedRecord(old *ledger.Record, k aggKey, c eventlog.Commit, idx int, st *attempts, info ledger.ErrorInfo, d retry.Decision, cur *resolved, now time.Time) *ledger.Record {
	rec := old
	if rec == nil {
		rec = &ledger.Record{Subscription: r.s.name, AggregateType: k.typ, AggregateID: k.id}
	}
	rec.Version, rec.Index, rec.Position = c.Version, uint32(idx), c.Position
	rec.InvocationKey = st.key // what a retry or resume of the event goes on with
	rec.Traceparent = r.e.trace.traceparent(st.key)
	rec.Error = info
	rec.Attempts = st.n
	rec.ParkedRetries = 0
	rec.FirstFailure, rec.LastFailure = st.first, st.last
	rec.State, rec.NextRetry, rec.WaitReason = ledger.StateWaiting, time.Time{}, ledger.WaitNoRetries
	if d.Class == retry.Unrecoverable && !cur.parked.RetriesUnrecoverable() {
		// Parked at once for an operator: no retry fixes it
		// (docs/failure-model.md, section 5).
		rec.WaitReason = ledger.WaitUnrecoverable
	} else if next, ok := cur.parked.Next(0, now); ok {
		rec.State, rec.NextRetry, rec.WaitReason = ledger.StateRetrying, next, ""
	}
	parked := ledger.Entry{Time: now, Action: "parked", Attempt: st.n, Version: c.Version, Error: &info,
		Reason: parkReason(rec)}
	if len(rec.History) == 0 {
		// The ledger always keeps the first entry: make it the park, then
		// the attempts that led to it.
		rec.AddHistory(parked)
		for _, h := range st.history {
			rec.AddHistory(h)
		}
	} else {
		for _, h := range st.history {
			rec.AddHistory(h)
		}
		rec.AddHistory(parked)
	}
	return rec
}

// writePark writes the park of aggregate k in one transaction of its
// partition that moves the checkpoint to pos (0: not at all): the record
// build makes of the one stored (nil: none), the capsule of the failure
// that parked it (none removes one an earlier park left), the spent
// budget's removal and the "parked" notification of now. A ledger error is tried
// again every second, said once a minute, until the partition stops (not
// ok: nothing is parked; the event is the next owner's).
func (r *run) writePark(p *partition, k aggKey, pos uint64, st *attempts, capsule []byte, now time.Time, build func(old *ledger.Record) *ledger.Record) (rec *ledger.Record, ok bool) {
	for tries := 0; ; tries++ {
		err := r.withCheckpoint(p.ctx, p, pos, func(tx ledger.Tx) error {
			old, err := tx.Parked(r.s.name, k.typ, k.id)
			switch {
			case errors.Is(err, ledger.ErrNotFound):
				old = nil
			case err != nil:
				return err
			}
			rec = build(old)
			if err := tx.PutParked(rec); err != nil {
				return err
			}
			if err := tx.PutCapsule(r.s.name, k.typ, k.id, capsule); err != nil {
				return err
			}
			if st.stored {
				// The spent budget now lives in the record.
				if err := tx.DeleteMeta(r.s.name, budgetKey(k)); err != nil {
					return err
				}
			}
			info := rec.Error
			return tx.Notify(ledger.Notification{
				Type: ledger.NotifyParked, Time: now, Subscription: r.s.name,
				AggregateType: k.typ, AggregateID: k.id, Version: rec.Version, Error: &info,
				Reason: parkReason(rec),
			})
		})
		if err == nil {
			return rec, true
		}
		if p.ctx.Err() != nil {
			// Stopped, or fenced (another host owns the partition now).
			return nil, false
		}
		if r.capsuleTooBig(err, capsule, k) {
			capsule = nil
			continue
		}
		// The event is held until the park is written (a full disk, say):
		// said once, then every minute, not every second.
		if tries%60 == 0 {
			r.e.logger.Error("parking failed; trying again every second", "subscription", r.s.name, "aggregate", k.String(), "err", err)
		}
		if sleepReal(p.ctx) != nil {
			return nil, false
		}
	}
}

// hold holds aggregate a's later events in its partition: they wait, in
// order, for a resume or a skip.
func (r *run) hold(p *partition, a *aggState) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.setMode(a, modeHeld)
	a.park = r.parks.Add(1)
	for _, q := range a.queue {
		p.finished(q.Position)
	}
	a.queue = nil
}

// parkReason says what a park leads to, for its history entry and its
// notification: long-horizon retries, or an operator and why.
func parkReason(rec *ledger.Record) string {
	if rec.State == ledger.StateRetrying {
		return "long-horizon retries scheduled"
	}
	return waitText(rec.WaitReason)
}

// waitText is a WaitReason in words.
func waitText(why string) string {
	switch why {
	case ledger.WaitUnrecoverable:
		return "awaiting operator: unrecoverable, no long-horizon retry (subscription.parked.retry-unrecoverable = false)"
	case ledger.WaitRetriesSpent:
		return "awaiting operator: long-horizon retries spent"
	case ledger.WaitNoRetries:
		return "awaiting operator: no long-horizon retries (subscription.parked.max-retries = -1)"
	}
	return "awaiting operator"
}

// putCapsule keeps an attempt's capsule beside the aggregate's record,
// written earlier in tx; nil (the invoker recorded none, or the failure
// was the engine's own: the aggregate's stream unreadable) leaves the
// capsule the record has, of an earlier attempt at the same event.
func putCapsule(tx ledger.ParkedRecords, sub string, k aggKey, capsule []byte) error {
	if len(capsule) == 0 {
		return nil
	}
	return tx.PutCapsule(sub, k.typ, k.id, capsule)
}

// capsuleTooBig reports whether the ledger refused a transaction as too
// big (a capsule near the JetStream server's max_payload) while it carried
// capsule: the caller then writes the record without it, since a record
// kept matters more than its recording, and an attempt that could never be
// written would hold the aggregate for ever.
func (r *run) capsuleTooBig(err error, capsule []byte, k aggKey) bool {
	if len(capsule) == 0 || !errors.Is(err, ledger.ErrTooBig) {
		return false
	}
	r.e.logger.Warn("the attempt's capsule makes the ledger transaction too big; keeping the record without it",
		"subscription", r.s.name, "aggregate", k.String(), "capsuleBytes", len(capsule), "err", err)
	return true
}
