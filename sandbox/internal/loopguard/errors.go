package loopguard

import (
	"errors"
	"fmt"
)

var (
	// ErrNoYieldImport means the module does not import
	// wasi_snapshot_preview1.sched_yield of type () -> i32, so the guard has
	// nothing to call. The caller falls back to wazero's
	// WithCloseOnContextDone.
	ErrNoYieldImport = errors.New("loopguard: module does not import wasi_snapshot_preview1.sched_yield () -> i32")

	// ErrUnsupported means the module uses an instruction or type the
	// rewriter cannot decode (SIMD, threads, exception handling, GC, ...).
	// The error wrapping it names the opcode, the function index and the
	// module offset. The caller may fall back as for ErrNoYieldImport.
	ErrUnsupported = errors.New("loopguard: unsupported WebAssembly feature")

	// ErrMalformed means the input is not a well-formed module.
	ErrMalformed = errors.New("loopguard: malformed module")
)

// decodeError is a failure at a place in the module. It reads
// "loopguard: function 12, offset 0x1234: unsupported opcode 0xfd (SIMD)"
// and unwraps to ErrMalformed or ErrUnsupported.
type decodeError struct {
	where  string // "function 12", "constant expression", or empty
	offset int    // module offset, or -1 when the failure has no one place
	msg    string
	kind   error
}

func (e *decodeError) Error() string {
	s := "loopguard: "
	if e.where != "" {
		s += e.where
		if e.offset >= 0 {
			s += ", "
		} else {
			s += ": "
		}
	}
	if e.offset >= 0 {
		s += fmt.Sprintf("offset %#x: ", e.offset)
	}
	return s + e.msg
}

func (e *decodeError) Unwrap() error { return e.kind }

// malformedAt reports malformed input at module offset off (-1: nowhere).
func malformedAt(off int, format string, args ...any) error {
	return &decodeError{offset: off, msg: fmt.Sprintf(format, args...), kind: ErrMalformed}
}

// unsupportedAt reports an unsupported feature at module offset off.
func unsupportedAt(off int, format string, args ...any) error {
	return &decodeError{offset: off, msg: fmt.Sprintf(format, args...), kind: ErrUnsupported}
}

// inFunc records that err happened in function fn (-1: in a constant
// expression).
func inFunc(fn int, err error) error {
	var de *decodeError
	if errors.As(err, &de) && de.where == "" {
		if fn < 0 {
			de.where = "constant expression"
		} else {
			de.where = fmt.Sprintf("function %d", fn)
		}
	}
	return err
}
