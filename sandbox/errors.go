package sandbox

import "errors"

// Errors from Load. Each is wrapped with the detail that names the problem.
var (
	// ErrNotWasm means the bytes are not a WebAssembly binary.
	ErrNotWasm = errors.New("not a WebAssembly module")
	// ErrInvalidModule means the bytes are WebAssembly that does not compile.
	ErrInvalidModule = errors.New("invalid WebAssembly module")
	// ErrABI means the module does not follow the Berth ABI: a wrong version,
	// a missing export, an import the host does not provide, a bad description.
	ErrABI = errors.New("module breaks the Berth ABI")
	// ErrClosed means the sandbox or the module was closed.
	ErrClosed = errors.New("sandbox closed")
)

// ErrWarmingUp is what Outcome.Err wraps for a call that ran past its
// deadline on the interpreter tier while the module's compiled code was
// being made: the host's condition, not the handler's (Outcome.WarmingUp).
var ErrWarmingUp = errors.New("the call ran on the interpreter while the module compiles")

// errDeadline is the panic value host functions use to end a call whose
// deadline passed; wazero turns it into the call's error.
var errDeadline = errors.New("deadline exceeded")

// errBadPointer ends a call whose guest handed a host function a pointer or
// length outside its memory.
var errBadPointer = errors.New("guest passed a pointer outside its memory to a host function")
