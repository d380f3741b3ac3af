package berth

import (
	"errors"
	"fmt"
	"time"

	"github.com/berthhq/berth/wasm/abi"
)

// ErrorClass is a named class of failures, optionally under a parent class,
// playing the part exception classes play on the JVM: a handler's retry
// settings name classes as unrecoverable or recoverable, and the host decides
// by the nearest class in the failure's chain.
//
// An ErrorClass is also an error value, so errors.Is(err, UnknownBuyer) is
// true for a failure of UnknownBuyer or of any class under it.
type ErrorClass struct {
	name   string
	parent *ErrorClass
}

// NewErrorClass declares a class. parent is nil for a class directly under
// the root.
func NewErrorClass(name string, parent *ErrorClass) *ErrorClass {
	return &ErrorClass{name: name, parent: parent}
}

// Name returns the class name, as the host and the ledger show it.
func (c *ErrorClass) Name() string { return c.name }

// Parent returns the parent class, nil for a class under the root.
func (c *ErrorClass) Parent() *ErrorClass { return c.parent }

// Error returns the class name, so a class can be used with errors.Is.
func (c *ErrorClass) Error() string { return c.name }

// Chain returns the class's name and its ancestors' names, nearest first.
func (c *ErrorClass) Chain() []string {
	var chain []string
	for k := c; k != nil; k = k.parent {
		chain = append(chain, k.name)
	}
	return chain
}

// Is reports whether c is target or one of target's descendants.
func (c *ErrorClass) isA(target *ErrorClass) bool {
	for k := c; k != nil; k = k.parent {
		if k == target || k.name == target.name {
			return true
		}
	}
	return false
}

// New returns a failure of this class with the message.
func (c *ErrorClass) New(message string) *Error { return &Error{Class: c, Message: message} }

// Errorf returns a failure of this class with a formatted message; %w wraps.
func (c *ErrorClass) Errorf(format string, args ...any) *Error {
	err := fmt.Errorf(format, args...)
	return &Error{Class: c, Message: err.Error(), Err: errors.Unwrap(err)}
}

// Wrap returns a failure of this class caused by err (nil stays nil).
func (c *ErrorClass) Wrap(err error) error {
	if err == nil {
		return nil
	}
	return &Error{Class: c, Message: err.Error(), Err: err}
}

// Classes the SDK itself reports. Name them in Retry lists like any other.
// Each is one of the host's builtin classes (wasm/abi/ABI.md, "Builtin
// classes"); a test in the host's module keeps the names and parents in step.
var (
	// ClassPanic is a handler that panicked; recoverable unless listed.
	ClassPanic = NewErrorClass("berth.Panic", nil)
	// ClassHost is a host call that failed for a reason of its own.
	ClassHost = NewErrorClass("berth.HostError", nil)
	// ClassConnectionRefused is an outbound connection refused: systemic.
	ClassConnectionRefused = NewErrorClass("berth.ConnectionRefused", ClassHost)
	// ClassOutboundDenied is a request to a host the module may not reach.
	ClassOutboundDenied = NewErrorClass("berth.OutboundDenied", ClassHost)
	// ClassWaitTimeout is a host call whose wait ran out: backpressure.
	ClassWaitTimeout = NewErrorClass("berth.WaitTimeout", ClassHost)
	// ClassUnsupported is a port this host does not offer to the processor.
	ClassUnsupported = NewErrorClass("berth.Unsupported", ClassHost)
)

// Classes the host gives an attempt it ended itself; a handler never returns
// them, but names them in Retry lists to act on them, for example
// Unrecoverable: []*berth.ErrorClass{berth.ClassTimeout} to park on the first
// timeout. (berth.Canceled, an attempt the host cut short on shutdown or
// reset, is never counted, so there is nothing to list.)
var (
	// ClassTimeout is an attempt that ran past its Timeout: recoverable
	// unless listed.
	ClassTimeout = NewErrorClass("berth.Timeout", nil)
	// ClassTrap is a guest that crashed (a runtime fatal error, a bad
	// pointer, a result the host cannot decode): recoverable unless listed.
	ClassTrap = NewErrorClass("berth.Trap", nil)
	// ClassMemoryExceeded is a guest that needed more memory than its
	// module's memory-limit: recoverable unless listed.
	ClassMemoryExceeded = NewErrorClass("berth.MemoryExceeded", nil)
)

// Error is a classified failure. Return one (or wrap one) from a handler to
// tell the host its class, a code, and how to treat it.
type Error struct {
	Class      *ErrorClass     // nil: an unclassified failure
	Message    string          // the text the ledger shows
	Code       string          // optional machine-readable code
	Kind       abi.FailureKind // unspecified (default), systemic or backpressure
	RetryAfter time.Duration   // with backpressure: retry no sooner than this
	Err        error           // the cause, if any
}

// Error returns the message.
func (e *Error) Error() string { return e.Message }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is matches an *ErrorClass that is the failure's class or an ancestor of it.
func (e *Error) Is(target error) bool {
	c, ok := target.(*ErrorClass)
	return ok && e.Class != nil && e.Class.isA(c)
}

// WithCode sets the code and returns e.
func (e *Error) WithCode(code string) *Error { e.Code = code; return e }

// Systemic marks err as an outage that is not the aggregate's fault: the host
// pauses the partition and probes until it is back, spending no budget.
func Systemic(err error) error {
	if err == nil {
		return nil
	}
	e := asError(err)
	e.Kind = abi.KindSystemic
	return e
}

// Backpressure marks err as a busy dependency: the host retries with backoff
// and jitter, never sooner than retryAfter, and lowers its concurrency.
func Backpressure(err error, retryAfter time.Duration) error {
	if err == nil {
		return nil
	}
	e := asError(err)
	e.Kind = abi.KindBackpressure
	e.RetryAfter = retryAfter
	return e
}

// asError returns a copy of the *Error in err's chain (keeping err as the
// message and cause), or a new unclassified one.
func asError(err error) *Error {
	var found *Error
	if errors.As(err, &found) {
		c := *found
		c.Message = err.Error()
		if found != err {
			c.Err = err
		}
		return &c
	}
	return &Error{Message: err.Error(), Err: err}
}

// failureOf turns a handler's error into the ABI failure the host reads.
func failureOf(err error) abi.Failure {
	f := abi.Failure{Message: err.Error()}
	var e *Error
	if errors.As(err, &e) {
		if e.Class != nil {
			f.Classes = e.Class.Chain()
		}
		f.Code = e.Code
		f.Kind = e.Kind
		if e.RetryAfter > 0 {
			f.RetryAfterMillis = uint64((e.RetryAfter + time.Millisecond - 1) / time.Millisecond)
		}
	}
	return f
}
