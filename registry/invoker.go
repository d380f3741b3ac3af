package registry

import (
	"context"
	"fmt"

	"github.com/berthhq/berth/retry"
	"github.com/berthhq/berth/sandbox"
	"github.com/berthhq/berth/subscription"
	"github.com/berthhq/berth/wasm/abi"
)

// invokerFor returns what runs handler h of module d for the engine, by the
// processor's kind: a reactor's handler is a plain call; sagas and
// projections add their ports' semantics around it.
func (r *Registry) invokerFor(d *deployed, desc abi.Description, h abi.HandlerDesc) subscription.Invoker {
	var inv subscription.Invoker = wasmInvoker{mod: d.mod, handler: h.Name, stamp: r.stampOf(d)}
	switch desc.Kind {
	case abi.KindSaga:
		inv = r.sagaInvoker(d, desc, h)
	case abi.KindProjection:
		inv = r.projectionInvoker(d, desc, h)
	}
	return versioned{inv: inv, module: fmt.Sprintf("%s v%d", d.Name, max(d.Version, 1))}
}

// versioned names the module version on every failure of its invoker, so a
// parked record says which version failed (and a rollback can be chosen).
type versioned struct {
	inv    subscription.Invoker
	module string
}

func (v versioned) Invoke(ctx context.Context, d subscription.Delivery) *retry.Failure {
	f := v.inv.Invoke(ctx, d)
	if f != nil && f.Module == "" {
		f.Module = v.module
	}
	return f
}

// KeepsNoContext says whether the invoker versioned wraps keeps no
// reference to an attempt's context past its call (subscription.ContextFree).
func (v versioned) KeepsNoContext() bool {
	cf, ok := v.inv.(subscription.ContextFree)
	return ok && cf.KeepsNoContext()
}

// wasmInvoker runs one handler of a sandboxed module for the engine.
type wasmInvoker struct {
	mod     *sandbox.Module
	handler string
	stamp   *capsuleStamp
}

// Invoke turns a delivery into an ABI envelope, runs it and maps the
// sandbox's outcome to the failure the engine classifies (nil on success).
// The attempt's deadline is the engine's, on ctx: the sandbox observes it
// (d.Timeout only bounds a call whose ctx has no deadline) and reports a
// call it ended as a timeout.
func (w wasmInvoker) Invoke(ctx context.Context, d subscription.Delivery) *retry.Failure {
	env := envelope(&d, w.handler)
	_, f := call(ctx, w.mod, &env, d.Timeout, sandbox.Ports{}, w.stamp, d.Subscription)
	return f
}

// KeepsNoContext: the sandbox holds an attempt's context for its call only
// (callState.end drops it); what outlives a call (a host function's HTTP
// request) holds it through its Done (subscription.ContextFree).
func (wasmInvoker) KeepsNoContext() bool { return true }

// envelope is the ABI envelope of a delivery for one handler.
func envelope(d *subscription.Delivery, handler string) abi.Event {
	ev := d.Commit.Events[d.Index]
	return abi.Event{
		Handler:       handler,
		InvocationKey: d.InvocationKey,
		Attempt:       uint32(d.Attempt),
		Type:          ev.Type,
		AggregateType: d.Commit.AggregateType,
		AggregateID:   d.Commit.AggregateID,
		Version:       d.Commit.Version,
		Index:         uint32(d.Index),
		OwnerID:       d.Commit.OwnerID,
		Position:      d.Commit.Position,
		TimeUnixNano:  d.Commit.Time.UnixNano(),
		Payload:       ev.Payload,
	}
}

// failureOf maps a sandbox outcome to a classifiable failure. Host-side
// outcomes get the builtin classes (berth.Timeout, berth.Trap,
// berth.MemoryExceeded), so that handlers and classifier rules can name them;
// a call the host cancelled (shutdown, reset, removal; never a deadline) is
// berth.Canceled, which the engine does not count, and so is a timeout on
// the interpreter tier while the module compiles (sandbox.ErrWarmingUp),
// with retry.Failure.Await set to the end of the compile.
func failureOf(o *sandbox.Outcome) *retry.Failure {
	switch o.Kind {
	case sandbox.Success:
		return nil
	case sandbox.GuestFailure:
		f := &retry.Failure{
			Classes: o.Failure.Classes,
			Message: o.Failure.Message,
			Code:    o.Failure.Code,
			HTTP429: o.Observed.HTTP429,
		}
		switch o.Failure.Kind {
		case abi.KindSystemic:
			f.Reported = retry.ReportedSystemic
		case abi.KindBackpressure:
			f.Reported = retry.ReportedBackpressure
		}
		f.RetryAfter = max(o.Observed.RetryAfter, retry.RetryAfterMillis(o.Failure.RetryAfterMillis))
		if len(f.Classes) == 0 && o.Observed.ConnRefused {
			// The guest said nothing of its own, but its outbound call met a
			// refused connection: that is an outage, not the aggregate's fault.
			f.Classes = []string{retry.ClassConnectionRefused}
		}
		return f
	case sandbox.Timeout:
		if o.WarmingUp != nil {
			// On the interpreter while the module compiles: the host's condition, not the
			// handler's. The engine does not count it and delivers the event again on compiled code.
			return &retry.Failure{Classes: []string{retry.KindCanceled.Class()}, Message: o.Err().Error(), Await: o.WarmingUp}
		}
	}
	// The host ended the call: its kind's builtin class (retry's table);
	// an outcome of no known kind is a trap.
	k := o.Kind.HostKind()
	if k == retry.KindNone {
		k = retry.KindTrap
	}
	return &retry.Failure{Classes: []string{k.Class()}, Message: o.Message}
}
