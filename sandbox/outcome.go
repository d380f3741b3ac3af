package sandbox

import (
	"errors"
	"fmt"
	"time"

	"github.com/berthhq/berth/retry"
	"github.com/berthhq/berth/wasm/abi"
)

// OutcomeKind says how a call ended. The sandbox reports; the retry package
// decides what each kind means for the budget.
type OutcomeKind int

const (
	// Success: the handler returned without error.
	Success OutcomeKind = iota
	// GuestFailure: the handler returned an error (Failure says which).
	GuestFailure
	// Timeout: the call ran past its deadline and was stopped.
	Timeout
	// Trap: the guest crashed (a Go fatal error, an unrecovered panic in a
	// goroutine, a bad pointer handed to a host function, a broken ABI reply).
	Trap
	// MemoryExceeded: the guest needed more memory than its limit.
	MemoryExceeded
	// Canceled: the caller cancelled its context before any deadline passed
	// (the host shutting down, an operator resetting the subscription or
	// removing the module). It says nothing about the guest; a deadline that
	// passed, the sandbox's or the one the caller set on its context, is a
	// Timeout.
	Canceled
)

// String returns the kind in lower case, as logs and capsules show it:
// "success", "failure", or the host kind's name in retry's table
// ("memory-exceeded").
func (k OutcomeKind) String() string {
	switch k {
	case Success:
		return "success"
	case GuestFailure:
		return "failure"
	}
	if h := k.HostKind(); h != retry.KindNone {
		return h.String()
	}
	return fmt.Sprintf("outcome(%d)", int(k))
}

// HostKind is the host's failure kind of an outcome the host ended
// (retry.Kind, whose table gives its class and names); retry.KindNone for
// a success or the guest's own failure.
func (k OutcomeKind) HostKind() retry.Kind {
	switch k {
	case Timeout:
		return retry.KindTimeout
	case Trap:
		return retry.KindTrap
	case MemoryExceeded:
		return retry.KindMemoryExceeded
	case Canceled:
		return retry.KindCanceled
	}
	return retry.KindNone
}

// Outcome is the typed result of one call.
type Outcome struct {
	Kind OutcomeKind
	// Failure is the guest's own report, for GuestFailure.
	Failure abi.Failure
	// Message explains a Timeout, Trap, MemoryExceeded or Canceled outcome;
	// for a trap it holds the guest's panic text when stderr had one.
	Message string
	// Stderr is the tail of what the guest wrote to stderr (bounded).
	Stderr string
	// Duration is how long the call took, including waiting for an instance.
	Duration time.Duration
	// Overrun is, for a Timeout, how long the call went on after the host
	// saw its deadline pass: the cost of stopping the guest. The host sees
	// its own deadline when the instance's timer fires, and the caller's
	// when it next looks at the caller's context (the loop guard every few
	// thousand loop iterations, a sleep or host call at once).
	Overrun time.Duration
	// Observed notes what the host saw the guest's outbound calls meet, so a
	// failure can be classified (a refused connection, a 429).
	Observed Observed
	// Commands are the commands a saga sent; the caller sends them only if
	// Kind is Success.
	Commands []abi.Command
	// Tier is the tier the call ran on (TierInterpreter, TierCompiled); ""
	// when it got no instance.
	Tier string
	// WarmingUp is set on a Timeout of a call that ran on the interpreter
	// (or waited for an instance of it) while the module's background
	// compile was under way (Config.Tiering TierUp): a deadline that fits
	// the handler's compiled speed says nothing about the handler there.
	// It is closed when that compile has ended: the module's new calls run
	// compiled code (or, had the compile failed, the interpreter is all the
	// module has, and a timeout there is not WarmingUp). Err wraps
	// ErrWarmingUp for such an outcome.
	WarmingUp <-chan struct{}
	// Capsule is the recording of a failed call (GuestFailure, Timeout,
	// Trap, MemoryExceeded): its event, host calls, clock readings, random
	// bytes and outcome, redacted and within Config.CapsuleMaxBytes (ABI.md,
	// Attempt capsules). Nil for Success and Canceled; the caller sets the
	// module version and subscription it knows.
	Capsule *abi.Capsule
}

// Err returns the outcome as an error: nil for Success, one that wraps
// ErrWarmingUp for a Timeout on the interpreter tier during warm-up (see
// WarmingUp), else one that says what Error says.
func (o *Outcome) Err() error {
	switch {
	case o.Kind == Success:
		return nil
	case o.WarmingUp != nil:
		return fmt.Errorf("%w: %s", ErrWarmingUp, o.Message)
	}
	return errors.New(o.Error())
}

// Observed collects facts about a call's outbound requests.
type Observed struct {
	ConnRefused bool          // an outbound connection was refused
	HTTP429     bool          // an outbound request was answered 429
	RetryAfter  time.Duration // the largest Retry-After seen with a 429 or 503
}

// Error returns a one-line description of a non-success outcome.
func (o *Outcome) Error() string {
	switch o.Kind {
	case Success:
		return "success"
	case GuestFailure:
		return o.Failure.Message
	default:
		return o.Kind.String() + ": " + o.Message
	}
}
