package registry

import (
	"context"

	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/subscription"
)

// What the external tests (package registry_test, which open a whole host
// with assembly) need of the package's internals.

// SameJSON reports whether a and b encode to the same JSON.
var SameJSON = sameJSON

// ErrProjectionConflict is the error of a projection call whose reads changed before
// it applied.
var ErrProjectionConflict = errConflict

// InvokerOf returns the invoker the registry gives handler i of the
// deployed module name.
func (r *Registry) InvokerOf(name string, i int) subscription.Invoker {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := r.mods[name]
	desc := d.mod.Description()
	return r.invokerFor(d, desc, desc.Handlers[i])
}

// Waiting returns how many calls' writes wait for a transaction of the
// query store.
func (p *Projections) Waiting() int { return p.commits.waiting() }

// CallKV is the key/value port of one projection call.
type CallKV = callKV

// NewCallKV returns the key/value port of a call of sub's handler.
func NewCallKV(ctx context.Context, store ledger.Store, sub string) *CallKV {
	return newCallKV(ctx, store, sub)
}

// Apply applies a call's writes with the delivery's mark.
func (p *Projections) Apply(ctx context.Context, sub string, kv *CallKV, d *subscription.Delivery) error {
	return p.commits.apply(ctx, sub, kv, d)
}
