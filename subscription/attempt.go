package subscription

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/retry"
)

func randFloat() float64 { return rand.Float64() }

// maxAttemptHistory bounds the attempts a park copies into the record's
// history; the ledger bounds the history as a whole.
const maxAttemptHistory = 20

// attempts is what the engine remembers of the attempts at one event.
type attempts struct {
	n            int // attempts made, every kind
	failures     int // recoverable failures counted against MaxAttempts
	backpressure int // backpressure failures counted against BackpressureAttempts
	first, last  time.Time
	history      []ledger.Entry
	stored       bool   // recorded in the ledger (budget.go)
	key          string // the invocation key of the event (invocationkey.go)
	// charged are the failures counted against MaxAttempts that the
	// systemic detector counted too: refunded should they turn out to have
	// revealed an outage (outage.go).
	charged []charge
}

func (st *attempts) failed(now time.Time, version uint64, f *retry.Failure, d retry.Decision) {
	if st.first.IsZero() {
		st.first = now
	}
	st.last = now
	info := errorInfo(f, d)
	st.history = append(st.history, ledger.Entry{Time: now, Action: "attempt", Attempt: st.n, Version: version, Error: &info})
	if len(st.history) > maxAttemptHistory {
		st.history = slices.Delete(st.history, 0, len(st.history)-maxAttemptHistory)
	}
}

// deliver delivers one event until it is handled, the aggregate is parked,
// or the run stops. Each round reads (the partition's turn, the policy as
// it is now), makes one attempt (step.go) and records what it came to
// (settle). The policy is read afresh before every attempt, so a config
// reload applies to the next.
func (r *run) deliver(p *partition, a *aggState, c eventlog.Commit, idx int, live bool) (o outcome) {
	ctx := p.ctx
	var st attempts
	r.loadBudget(a.key, c.Version, idx, &st)
	key := r.keyFor(a, c, idx, &st)
	refund := func() { r.refundOutage(p, a, c.Version, idx, &st) }
	tr := r.e.trace.deliver(ctx, r.s.name, p.idx, c, idx, key, false)
	defer func() { tr.end(o) }()
	fresh := live && st.n == 0 && c.Position >= r.fresh // Delivery.Fresh
	for {
		refund()
		pol := r.s.cur.Load().policy
		probe, err := p.awaitTurn(ctx, &pol, refund)
		if err != nil {
			return outcomeCancelled
		}
		cur := r.s.cur.Load()
		st.n++
		s := r.attempt(ctx, tr, cur, Delivery{
			Subscription: r.s.name, Handler: cur.spec.Handler, InvocationKey: key,
			Attempt: st.n, Commit: c, Index: idx, Timeout: cur.policy.Timeout, Fresh: fresh,
		}, nil, false, liveSlot(p, live))
		fresh = false // whatever the attempt did, even one not counted
		if !s.counted {
			// Stopped, or cut short by the host for a condition of its own
			// (the module warming up on the interpreter): nothing is
			// counted or written, and the event is delivered again once
			// the condition has ended.
			st.n--
			if probe {
				p.probeDone(false)
			}
			if s.ready == nil || r.awaitHost(ctx, s.ready, a.key.String(), s.f) != nil {
				return outcomeCancelled
			}
			continue
		}
		if o, done := r.settle(p, a, c, idx, live, &st, probe, refund, &s); done {
			return o
		}
	}
}

// liveSlot is p when a live delivery holds one of its slots, else nil.
func liveSlot(p *partition, live bool) *partition {
	if live {
		return p
	}
	return nil
}

// settle records what attempt s at event idx of c came to, and reports
// done with the event's outcome, or not done: attempt it again. It is the
// retry budget: recoverable failures are retried up to MaxAttempts with
// the policy's backoff; unrecoverable ones park at once; systemic ones
// pause the partition and spend nothing (and the failures that revealed
// an outage are refunded, outage.go); backpressure is retried no sooner
// than Retry-After while the partition's concurrency is lowered, and
// parks only when BackpressureAttempts is spent.
func (r *run) settle(p *partition, a *aggState, c eventlog.Commit, idx int, live bool, st *attempts, probe bool, refund func(), s *step) (outcome, bool) {
	aggName := a.key.String()
	f, d, pol, now := s.f, s.d, &s.pol, s.end
	if f == nil {
		r.logSucceeded(aggName, st.key, st)
		p.succeeded(aggName, now, probe)
		r.clearBudget(p, a.key, st)
		return outcomeHandled, true
	}
	st.failed(now, c.Version, f, d)
	r.logAttemptFailed(aggName, st.key, st.n, f, d)
	if r.pausedForStore(p, now, probe) {
		return 0, false // the host's failure, not the aggregate's (storefull.go)
	}
	if probe || p.isPaused() || p.pauseEndedSince(s.begin) {
		// During a systemic pause a failure is the outage's, not the
		// aggregate's: nothing is spent. Only an unrecoverable one is the
		// aggregate's own (a bad input stays bad when the service is back).
		// So is the failure of an attempt begun before a pause that has
		// ended since: settled late, it would pause the partition again
		// for an outage that is over.
		if probe {
			p.probeDone(false)
		}
		if d.Class == retry.Unrecoverable {
			return r.park(p, a, c, idx, live, st, f, d), true
		}
		return 0, false
	}
	switch d.Class {
	case retry.Unrecoverable:
		return r.park(p, a, c, idx, live, st, f, d), true
	case retry.Systemic:
		p.enterSystemic(now, d.Reason)
		return 0, false
	case retry.Backpressure:
		st.backpressure++
		if st.backpressure >= pol.BackpressureAttempts {
			return r.park(p, a, c, idx, live, st, f, d), true
		}
		p.lowerConcurrency()
		r.saveBudget(p, a.key, c.Version, idx, st)
		wait := pol.BackpressureDelay(st.backpressure, d.RetryAfter, r.e.opts.Jitter())
		if p.waitOff(p.ctx, wait, live, refund) != nil {
			return outcomeCancelled, true
		}
		return 0, false
	}
	if d.CountsTowardOutage() {
		systemic, ch := p.failed(aggName, now)
		if systemic {
			return 0, false // the partition paused: the outage's, not the aggregate's
		}
		st.charged = append(st.charged, ch)
	}
	st.failures++
	refund() // an outage recognised since the failure was counted refunds it too
	if st.failures >= pol.MaxAttempts {
		o := r.park(p, a, c, idx, live, st, f, d)
		if o == outcomeParked {
			r.watchPark(p, a.key, c.Version, idx, st) // the outage's, should it reveal one (outage_park.go)
		}
		return o, true
	}
	r.saveBudget(p, a.key, c.Version, idx, st)
	if p.waitOff(p.ctx, pol.Backoff(st.failures), live, refund) != nil {
		return outcomeCancelled, true
	}
	return 0, false
}

// invoke runs one attempt under its deadline. The engine owns the attempt's
// deadline: it is set here, d.Timeout from now on the engine's clock (so a
// clock.Fake drives it), with cause ErrAttemptTimeout; the invoker, and the
// sandbox beneath it, only observe it through ctx and start no timer of
// their own. What an attempt its deadline ended failed with is
// retry.Overran's to say. The run's context being cancelled (shutdown,
// reset, removal) is the caller's to see: such an attempt is not counted
// at all. A panic in the invoker is a failure of class retry.ClassPanic,
// not a crash of the engine.
//
// No call starts while this host's cluster lease may have run out
// (lease.go): invoke waits for a renewal first, or returns a cancelled
// failure once the run stopped, which the caller does not count.
func (r *run) invoke(ctx context.Context, inv Invoker, d Delivery) *retry.Failure {
	return r.invokeAt(ctx, inv, d, r.e.clock.Now(), nil)
}

// invokeAt is invoke for a caller that read the engine's clock at now,
// right before: the lease fence checks that reading rather than take
// another (a read of the clock costs about 200 ns on a VM's clock source).
// slot is the partition whose slot a live delivery holds (nil for none):
// the invoker may leave it while it waits for a store (LeaveSlot), and
// the attempt takes it back here once Invoke has returned.
func (r *run) invokeAt(ctx context.Context, inv Invoker, d Delivery, now time.Time, slot *partition) (f *retry.Failure) {
	if !r.e.leaseValidAt(now) {
		if err := r.e.awaitLease(ctx, now); err != nil {
			return &retry.Failure{Classes: []string{retry.ClassCanceled}, Message: "not called: this host's cluster lease ran out"}
		}
		now = r.e.clock.Now() // it waited for a renewal: the attempt's time starts now
	}
	// The attempt's deadline is from the same reading, not another one
	// (issue 32: a clock read is a tenth of the engine's own work per call).
	var actx *attemptCtx
	if keepsNoContext(inv) {
		actx = reusedAttemptCtxAt(ctx, r.e.clock, now, d.Timeout)
		defer releaseAttemptCtx(actx) // after end, below
	} else {
		actx = newAttemptCtxAt(ctx, r.e.clock, now, d.Timeout)
	}
	actx.slot = slot
	defer actx.end()
	func() {
		defer func() {
			if v := recover(); v != nil {
				f = &retry.Failure{Classes: []string{retry.ClassPanic}, Message: fmt.Sprintf("handler panicked: %v", v)}
			}
		}()
		f = inv.Invoke(actx, d)
	}()
	timedOut := actx.timedOut()
	if actx.left.Load() {
		slot.backOnSlot()
	}
	if timedOut {
		return retry.Overran(f, d.Timeout)
	}
	return f
}

// awaitHost waits, for an attempt the host cut short (retry.AwaitsHost),
// until ready is closed; the run's context's error if it ends first.
func (r *run) awaitHost(ctx context.Context, ready <-chan struct{}, agg string, f *retry.Failure) error {
	r.e.logger.Info("attempt not counted: the host cut it short; it is made again when the host is ready",
		"subscription", r.s.name, "aggregate", agg, "reason", f.Message)
	select {
	case <-ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// errorInfo is a failure as the ledger keeps it; Kind names the host-side
// kind where there is one, else the class it was given.
func errorInfo(f *retry.Failure, d retry.Decision) ledger.ErrorInfo {
	kind := strings.ToLower(d.Class.String())
	if k := retry.KindOf(f.Classes); k != retry.KindNone && k != retry.KindCanceled { // a canceled attempt is never kept
		kind = k.LedgerName()
	}
	return ledger.ErrorInfo{
		Classes: classifiedChain(f, d), Message: truncate(f.Message, 4096), Code: f.Code, Kind: kind,
		Class: d.Class.String(), Reason: d.Reason, Undeclared: slices.Clone(d.Undeclared), Module: f.Module,
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
