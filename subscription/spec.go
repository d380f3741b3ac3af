package subscription

import (
	"context"
	"fmt"
	"time"

	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/retry"
)

// Delivery is one attempt at one event for one subscription.
type Delivery struct {
	Subscription string // "Processor.handler"
	Handler      string
	// InvocationKey is Processor.handler:aggregateType/aggregateId@version:index
	// (see InvocationKey), identical on every attempt at the same event, so
	// that a handler can pass it on as an idempotency key.
	InvocationKey string
	Attempt       int // from 1, counting every attempt at this event
	Commit        eventlog.Commit
	Index         int // the event within the commit
	// Timeout is the attempt's budget; the engine has already set it as the
	// deadline of the context handed to Invoke. The engine owns that
	// deadline: an invoker observes it through ctx and sets no timer of its
	// own.
	Timeout time.Duration
	// Fresh says that no attempt at this event was made before, here or on
	// another host: it is the first attempt of its live delivery, and the
	// event was appended after the run delivering it started (a run starts
	// with the host, and again at every change of the partitions it owns).
	// An invoker that guards against handling an event twice (a
	// projection's applied marks) may skip looking for an earlier attempt's
	// work; it must still not apply it twice, since an earlier owner of the
	// partition may still be ending an attempt as the new one starts.
	Fresh bool
}

// Event returns the delivered event.
func (d Delivery) Event() eventlog.Event { return d.Commit.Events[d.Index] }

// Invoker runs a handler. It returns nil on success, or the failure. It must
// honour ctx: the engine sets the attempt's deadline (Delivery.Timeout) on
// it, and an attempt that runs past it counts as failed with class
// retry.ClassTimeout unless the invoker's failure names classes of its own
// (other than retry.ClassCanceled) — even when the invoker returns nil after
// the deadline, because a handler that cannot be interrupted has still
// overrun its budget. ctx.Err() tells the two ends apart:
// context.DeadlineExceeded (cause ErrAttemptTimeout) is the attempt's
// timeout, context.Canceled the host stopping the delivery (shutdown, reset,
// removal), which the engine does not count.
type Invoker interface {
	Invoke(ctx context.Context, d Delivery) *retry.Failure
}

// InvokerFunc adapts a function to Invoker.
type InvokerFunc func(ctx context.Context, d Delivery) *retry.Failure

// Invoke calls f.
func (f InvokerFunc) Invoke(ctx context.Context, d Delivery) *retry.Failure { return f(ctx, d) }

// Start says where a new subscription (one without a checkpoint) begins. A
// stored checkpoint always wins over it.
type Start int

const (
	// StartEnd begins after the last commit in the log at the time the
	// subscription first starts: deploying a reactor or saga does not replay
	// history. The default.
	StartEnd Start = iota
	// StartBeginning begins at the first commit, as a projection does.
	StartBeginning
)

// String returns "end" or "beginning".
func (s Start) String() string {
	if s == StartBeginning {
		return "beginning"
	}
	return "end"
}

// Spec configures one subscription: one handler of one processor.
type Spec struct {
	// Name is the subscription's name; empty: Processor + "." + Handler.
	Name      string
	Processor string
	Handler   string
	// EventTypes are the event types delivered to the handler; events of
	// other types are passed over (they still advance the checkpoint).
	// Empty: every event.
	EventTypes []string
	// Start applies only to a subscription without a stored checkpoint.
	Start Start
	// The retry layers above the host's default (Options.Retry), setting by
	// setting, later layers winning: the processor's settings, the
	// handler's, and the host's per-subscription override.
	ProcessorRetry, HandlerRetry, OverrideRetry retry.Settings
	// Classes is the error class tree the handler's module declares: a
	// failure's chain is classified by it, the nearest declared class's
	// ancestors taken from the tree (retry.ClassTree.Resolve), and the
	// classes it does not declare are recorded as undeclared. Nil: no tree
	// known, the chain is taken as sent and nothing is recorded.
	Classes *retry.ClassTree
	// Parked are the long-horizon retry settings of this subscription,
	// setting by setting over Options.Parked over retry.DefaultParked().
	Parked retry.ParkedSettings
	// Invoker runs the handler. Required.
	Invoker Invoker
	// OnReset, when set, runs inside the transaction in which Reset writes
	// the new checkpoint (position), so that state derived from the events
	// (a projection's read model) is reset in the same step; its error
	// fails the Reset and changes nothing. Nil: nothing but the checkpoint.
	OnReset func(tx ledger.Tx, position uint64) error
}

func (s Spec) name() string {
	if s.Name != "" {
		return s.Name
	}
	return s.Processor + "." + s.Handler
}

func (s Spec) validate() error {
	if s.name() == "." || s.name() == "" {
		return fmt.Errorf("subscription: spec needs a Name or a Processor and Handler")
	}
	if s.Invoker == nil {
		return fmt.Errorf("subscription %q: spec has no Invoker", s.name())
	}
	if s.Start != StartEnd && s.Start != StartBeginning {
		return fmt.Errorf("subscription %q: unknown Start %d", s.name(), s.Start)
	}
	return nil
}

// resolved is a Spec with its policies resolved; it is replaced as a whole
// on a config reload, and every attempt reads the current one, so a change
// applies from the next attempt on.
type resolved struct {
	spec   Spec
	name   string
	policy retry.Policy
	parked retry.ParkedSettings
	types  map[string]struct{} // nil: all
	// classifier is the host's application-wide classifier when resolved.
	classifier *retry.Classifier
}

// hostLayer is the host's own layer beneath every subscription: its
// [subscription.retry], [subscription.parked] and classifier rules. It is
// swapped whole on a config reload (SetHostDefaults).
type hostLayer struct {
	retry      retry.Settings
	parked     retry.ParkedSettings
	classifier *retry.Classifier
}

func resolve(s Spec, host *hostLayer) *resolved {
	r := &resolved{spec: s, name: s.name(), classifier: host.classifier}
	// The host's [subscription.retry] is reported as the default: it is
	// the host's default, beneath everything the module declares.
	r.policy = retry.Resolve(
		retry.Layer{Source: retry.SourceDefault, Settings: host.retry},
		retry.Layer{Source: retry.SourceProcessor, Settings: s.ProcessorRetry},
		retry.Layer{Source: retry.SourceHandler, Settings: s.HandlerRetry},
		retry.Layer{Source: retry.SourceOverride, Settings: s.OverrideRetry},
	)
	r.policy.Classes = s.Classes
	r.parked = retry.ResolveParked(host.parked, s.Parked)
	if len(s.EventTypes) > 0 {
		r.types = make(map[string]struct{}, len(s.EventTypes))
		for _, t := range s.EventTypes {
			r.types[t] = struct{}{}
		}
	}
	return r
}

func (r *resolved) wants(eventType string) bool {
	if r.types == nil {
		return true
	}
	_, ok := r.types[eventType]
	return ok
}

// wantsAny reports whether any event of c from index from on is delivered.
func (r *resolved) wantsAny(c *eventlog.Commit, from int) bool {
	for i := from; i < len(c.Events); i++ {
		if r.wants(c.Events[i].Type) {
			return true
		}
	}
	return false
}

// UpdateSpec replaces a running subscription's configuration (a config
// reload): retry layers, parked settings, event types and invoker apply from
// the next attempt, delivery or read on. Name and Start cannot change.
func (e *Engine) UpdateSpec(spec Spec) error {
	if err := spec.validate(); err != nil {
		return err
	}
	// Under e.mu, as SetHostDefaults swaps the host's layer and re-resolves:
	// a spec resolved over a layer a concurrent reload has just replaced
	// would undo that reload for the subscription.
	e.mu.Lock()
	defer e.mu.Unlock()
	s, err := e.subLocked(spec.name())
	if err != nil {
		return err
	}
	s.cur.Store(resolve(spec, e.host.Load()))
	return nil
}

// SetHostDefaults replaces the host's own layer (a config reload of
// [subscription.retry], [subscription.parked] and the classifier rules) and
// re-resolves every subscription; it applies from the next attempt on.
func (e *Engine) SetHostDefaults(defaults retry.Settings, parked retry.ParkedSettings, classifier *retry.Classifier) {
	e.mu.Lock()
	defer e.mu.Unlock()
	host := &hostLayer{retry: defaults, parked: parked, classifier: classifier}
	e.host.Store(host)
	for _, s := range e.subs {
		s.cur.Store(resolve(s.cur.Load().spec, host))
	}
}
