package subscription

import (
	"context"
	"time"

	"github.com/berthhq/berth/retry"
)

// step is what one attempt at an event came to.
type step struct {
	// counted is false when the attempt does not count: the run stopped
	// during it (ready nil), or the host cut it short for a condition of
	// its own (ready, closed once the condition has ended; f says why).
	counted bool
	ready   <-chan struct{}
	f       *retry.Failure // nil: handled
	d       retry.Decision // f classified; zero for a success
	pol     retry.Policy   // the policy f was classified under
	begin   time.Time      // when the attempt began, on the engine's clock
	end     time.Time      // when the attempt ended, on the engine's clock
}

// attempt is the one attempt step of delivery (deliver) and of a parked
// aggregate's long-horizon retry (parkedRetry): it begins the span of
// attempt del.Attempt, calls cur's handler under del.Timeout (or, when
// unread is not nil, the event could not be read: it stands for the
// call's failure and nothing is called), classifies the failure under
// cur's policy, counts the call in the attempt metrics (phase
// long-horizon when longHorizon) and marks the span with the failure;
// slot is the partition whose slot a live delivery holds, nil for none
// (invokeAt). What the outcome leads to (a backoff, a park, a resume) is the caller's.
func (r *run) attempt(ctx context.Context, tr *deliveryTrace, cur *resolved, del Delivery, unread *retry.Failure, longHorizon bool, slot *partition) (s step) {
	clk := r.e.clock
	actx := tr.attempt(ctx, del.Attempt)
	start := clk.Now()
	f := unread
	if unread == nil {
		f = r.invokeAt(actx, cur.spec.Invoker, del, start, slot)
	}
	if ctx.Err() != nil {
		return step{f: f}
	}
	if ready := retry.AwaitsHost(f); ready != nil {
		return step{ready: ready, f: f}
	}
	s = step{counted: true, f: f, pol: cur.policy, begin: start, end: clk.Now()}
	if f != nil {
		s.d = retry.Classify(f, &s.pol, cur.classifier)
	}
	if unread == nil {
		r.e.obs.attempt(r.s.name, f, s.d, &s.pol, del.Commit.Time, start, s.end, longHorizon)
	}
	tr.fail(f, s.d)
	return s
}
