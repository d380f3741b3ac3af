package subscription

import (
	"context"

	"github.com/berthhq/berth/retry"
)

// What the external tests (package subscription_test, which open a registry
// and a sandbox beneath the engine) need of the package's internals.

// Attempter makes one attempt of subscription name's current handler as a
// run of e does in deliver: the spec's invoker, read afresh, run by
// run.invoke under the attempt's context (its deadline the policy's
// Timeout, on e's clock) as the child of ctx, which stands for the
// partition's. It returns nil when e has no subscription name.
func (e *Engine) Attempter(name string) func(ctx context.Context, d Delivery) *retry.Failure {
	e.mu.Lock()
	s := e.subs[name]
	e.mu.Unlock()
	if s == nil {
		return nil
	}
	r := &run{s: s, e: e}
	return func(ctx context.Context, d Delivery) *retry.Failure {
		cur := r.s.cur.Load()
		d.Subscription, d.Handler, d.Timeout = r.s.name, cur.spec.Handler, cur.policy.Timeout
		return r.invoke(ctx, cur.spec.Invoker, d)
	}
}
