package registry

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/berthhq/berth/retry"
	"github.com/berthhq/berth/sandbox"
	"github.com/berthhq/berth/wasm/abi"
)

// Call runs one call of a module's handler in the sandbox, as every invoker of the host does (a
// reactor's, a saga's and its rejection handler's, a projection's): the envelope env under timeout
// (an attempt's deadline on ctx comes first) with the call's ports. It returns the failure the engine
// classifies, nil on success: a guest's own failure keeps its classes, kind and retry-after (raised to
// a Retry-After the sandbox saw, and classed berth.ConnectionRefused when the guest gave no class but
// met a refused connection); a timeout, trap, exceeded memory or cancellation gets the builtin class.
// On success it returns the commands a saga queued, checked as the host checks them before it sends
// any ([CheckCommands]).
//
// Tools that run modules outside the engine (hostspec) call it too, so that a call there is the
// host's call.
func Call(ctx context.Context, mod *sandbox.Module, env *abi.Event, timeout time.Duration, ports sandbox.Ports) ([]abi.Command, *retry.Failure) {
	return call(ctx, mod, env, timeout, ports, nil, "")
}

// capsuleStamp is the deployed module version an invoker runs, which its
// failures' attempt capsules name.
type capsuleStamp struct {
	Name    string
	Version int
	SHA256  string
	Host    string // the engine's host id ("" for a single host)
}

func (r *Registry) stampOf(d *deployed) *capsuleStamp {
	return &capsuleStamp{Name: d.Name, Version: max(d.Version, 1), SHA256: d.SHA256, Host: r.opts.Engine.Host()}
}

// call is Call, attaching to a failure the attempt's capsule (encoded, in
// retry.Failure.Capsule) with the module version of stamp (nil: the
// sandbox's name and sha256 only) and the subscription sub. Only a failure
// pays for it.
func call(ctx context.Context, mod *sandbox.Module, env *abi.Event, timeout time.Duration, ports sandbox.Ports, stamp *capsuleStamp, sub string) ([]abi.Command, *retry.Failure) {
	o := mod.InvokeWith(ctx, env, timeout, ports)
	if f := failureOf(&o); f != nil {
		if c := o.Capsule; c != nil && f.Await == nil {
			if stamp != nil {
				c.Module = abi.CapsuleModule{Name: stamp.Name, Version: stamp.Version, SHA256: stamp.SHA256}
				c.Host = stamp.Host
			}
			c.Subscription = sub
			if b, err := abi.EncodeCapsule(c); err == nil {
				f.Capsule = b
			}
		}
		return nil, f
	}
	if f := CheckCommands(env.InvocationKey, o.Commands); f != nil {
		return nil, f
	}
	return o.Commands, nil
}

// CheckCommands returns the failure of a call (its invocation key) that queued a command whose payload
// is not JSON, class berth.InvalidCommand, naming the first such command; nil when every payload is
// JSON or empty. A call that fails it sends none of its commands.
func CheckCommands(invocationKey string, cmds []abi.Command) *retry.Failure {
	for _, c := range cmds {
		if len(c.Payload) > 0 && !json.Valid(c.Payload) {
			return &retry.Failure{Classes: []string{retry.ClassInvalidCommand},
				Message: fmt.Sprintf("command %s %s of %s: the payload is not JSON", c.Type, c.AggregateID, invocationKey)}
		}
	}
	return nil
}

// DeclaredRetry returns the retry layers a module declares for its handler: the processor's and the
// handler's own, as the host's subscription of that handler takes them (retry.Resolve puts them over
// the host's defaults and under the operator's override).
func DeclaredRetry(desc abi.Description, handler string) (processor, own retry.Settings) {
	for _, h := range desc.Handlers {
		if h.Name == handler {
			own = settingsOf(h.Retry)
		}
	}
	return settingsOf(desc.Retry), own
}
