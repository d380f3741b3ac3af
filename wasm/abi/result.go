package abi

import (
	"fmt"
	"unicode/utf8"
)

// Status of a handled event, the first field of a Result.
const (
	// StatusOK means the handler succeeded.
	StatusOK = 0
	// StatusFailed means the handler failed; the Result carries a Failure.
	StatusFailed = 1
)

// FailureKind is how the guest itself classifies a failure. Most failures are
// KindUnspecified and the host classifies them by class.
type FailureKind uint8

const (
	// KindUnspecified leaves classification to the host (by class, then as
	// recoverable).
	KindUnspecified FailureKind = 0
	// KindSystemic reports an outage that is not the aggregate's fault: the
	// host pauses the partition instead of spending the aggregate's budget.
	KindSystemic FailureKind = 1
	// KindBackpressure reports a busy dependency; the host retries no sooner
	// than RetryAfterMillis and lowers the partition's concurrency.
	KindBackpressure FailureKind = 2
)

// String names the kind as it appears in logs and the ledger.
func (k FailureKind) String() string {
	switch k {
	case KindUnspecified:
		return "unspecified"
	case KindSystemic:
		return "systemic"
	case KindBackpressure:
		return "backpressure"
	default:
		return fmt.Sprintf("kind(%d)", uint8(k))
	}
}

// Failure describes why a handler failed.
type Failure struct {
	Kind FailureKind
	// Classes is the error class chain, nearest first: the failure's own class,
	// then its parent, up to (not including) the root. Empty for a plain error.
	Classes []string
	// Message is the error text.
	Message string
	// Code is an optional machine-readable code.
	Code string
	// RetryAfterMillis asks the host not to retry sooner (0: no floor).
	RetryAfterMillis uint64
}

// Result is what berth_handle returns.
type Result struct {
	Status  uint8
	Failure Failure // meaningful when Status is StatusFailed
}

// AppendResult appends the encoding of r to buf.
func AppendResult(buf []byte, r *Result) []byte {
	e := Encoder{buf: buf}
	e.Uint(uint64(r.Status))
	if r.Status == StatusFailed {
		f := &r.Failure
		e.Uint(uint64(f.Kind))
		e.Strings(f.Classes)
		e.String(f.Message)
		e.String(f.Code)
		e.Uint(f.RetryAfterMillis)
	}
	return e.buf
}

// DecodeResult decodes a Result.
func DecodeResult(b []byte) (Result, error) {
	d := NewDecoder(b)
	var r Result
	r.Status = d.Byte()
	switch r.Status {
	case StatusOK:
	case StatusFailed:
		r.Failure.Kind = FailureKind(d.Byte())
		r.Failure.Classes = d.Strings()
		r.Failure.Message = d.String()
		r.Failure.Code = d.String()
		r.Failure.RetryAfterMillis = d.Uint()
	default:
		if d.Err() == nil {
			return r, fmt.Errorf("abi: unknown result status %d", r.Status)
		}
	}
	if err := d.Done(); err != nil {
		return r, err
	}
	if r.Failure.Kind > KindBackpressure {
		return r, fmt.Errorf("abi: unknown failure kind %d", r.Failure.Kind)
	}
	if err := r.Failure.validate(); err != nil {
		return r, err
	}
	return r, nil
}

// validate refuses what the host must not store as is: a class name that is
// empty or not UTF-8, a message or code that is not UTF-8. The error names
// the field and quotes the value with the bad bytes escaped.
func (f *Failure) validate() error {
	for i, c := range f.Classes {
		switch {
		case c == "":
			return fmt.Errorf("abi: failure class %d is empty", i+1)
		case !utf8.ValidString(c):
			return fmt.Errorf("abi: failure class %d %+q is not valid UTF-8", i+1, c)
		}
	}
	if !utf8.ValidString(f.Message) {
		return fmt.Errorf("abi: failure message %+q is not valid UTF-8", clip(f.Message, 200))
	}
	if !utf8.ValidString(f.Code) {
		return fmt.Errorf("abi: failure code %+q is not valid UTF-8", clip(f.Code, 200))
	}
	return nil
}

// clip shortens s to at most n bytes for an error message.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
