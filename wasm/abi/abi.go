// Package abi is the contract between the Berth host and a guest module: the
// names of the exports and imports, the status codes, and a small binary codec
// for the messages that cross the boundary (the event envelope, the result,
// the module description and the host-call requests and replies).
//
// The codec is pure Go with no dependencies and no reflection, so that the
// guest SDK (compiled to WebAssembly) and the host share one implementation.
// ABI.md beside this file describes the same contract for authors of guests in
// other languages.
package abi

// Version is the ABI version this package implements. A module reports its
// version from the berth_abi_version export; the host refuses any other.
const Version = 1

// Exports a guest module must provide.
const (
	// ExportABIVersion is `berth_abi_version() -> i32`.
	ExportABIVersion = "berth_abi_version"
	// ExportAlloc is `berth_alloc(size i32) -> i32`: a guest-owned buffer of
	// size bytes that the host writes a request into.
	ExportAlloc = "berth_alloc"
	// ExportDescribe is `berth_describe() -> i64`: the packed pointer and
	// length of the module's encoded Description.
	ExportDescribe = "berth_describe"
	// ExportHandle is `berth_handle(ptr i32, len i32) -> i64`: handle the
	// encoded Event at ptr and return the packed pointer and length of the
	// encoded Result.
	ExportHandle = "berth_handle"
	// ExportInitialize is the reactor initialiser that `go build
	// -buildmode=c-shared` emits; the host calls it once per instance.
	ExportInitialize = "_initialize"
)

// HostModule is the import module name of the host functions.
const HostModule = "berth"

// Host functions a guest may import from HostModule. Every one but Log and
// TakeReply returns an i64: a negative value is an ABI error (see the Err
// constants); zero or more is the length of a pending Reply that the guest
// copies into its memory with TakeReply before it makes another host call.
const (
	// ImportLog is `log(level i32, ptr i32, len i32)`.
	ImportLog = "log"
	// ImportHTTP is `http_request(ptr i32, len i32) -> i64`; the request is an
	// encoded HTTPRequest, the reply body an encoded HTTPResponse.
	ImportHTTP = "http_request"
	// ImportKVGet is `kv_get(ptr i32, len i32) -> i64`; the request is the key.
	ImportKVGet = "kv_get"
	// ImportKVPut is `kv_put(ptr i32, len i32) -> i64`; the request is an
	// encoded KVPut.
	ImportKVPut = "kv_put"
	// ImportKVDelete is `kv_delete(ptr i32, len i32) -> i64`; the request is
	// the key.
	ImportKVDelete = "kv_delete"
	// ImportCommand is `send_command(ptr i32, len i32) -> i64`; the request is
	// an encoded Command. Commands are sent only after the handler succeeded.
	ImportCommand = "send_command"
	// ImportConfig is `config_get(ptr i32, len i32) -> i64`; the request is
	// the key of a configuration value the operator handed to the module.
	ImportConfig = "config_get"
	// ImportTakeReply is `take_reply(ptr i32, len i32) -> i32`: copies the
	// pending reply into the guest buffer and returns the bytes copied.
	ImportTakeReply = "take_reply"
)

// HostImports lists every function the host provides in HostModule. A module
// that imports any other name from HostModule is refused at load.
var HostImports = []string{
	ImportLog, ImportHTTP, ImportKVGet, ImportKVPut, ImportKVDelete,
	ImportCommand, ImportConfig, ImportTakeReply,
}

// Negative results of host calls. They mean the call itself was malformed; a
// failure of the operation (a refused connection, a missing key) travels in
// the Reply instead.
const (
	// ErrNoReply is returned by TakeReply when no reply is pending.
	ErrNoReply = -1
	// ErrBadRequest is what a request/reply host function returns when
	// the call cannot be made at all: in version 1 only when it is made
	// from _initialize, where there is no event. A request that does not
	// decode is answered with a ReplyError Reply instead. Other negative
	// values are reserved (ABI.md, Negative values).
	ErrBadRequest = -2
)

// Pack returns a pointer and a length packed into one i64 as the exports
// berth_describe and berth_handle return them: pointer in the high 32 bits.
func Pack(ptr, length uint32) uint64 { return uint64(ptr)<<32 | uint64(length) }

// Unpack is the inverse of Pack.
func Unpack(v uint64) (ptr, length uint32) { return uint32(v >> 32), uint32(v) }

// Log levels for ImportLog; they map to slog's levels.
const (
	LogDebug = 0
	LogInfo  = 1
	LogWarn  = 2
	LogError = 3
)

// EventCommandRejected is the reserved event type of a saga's rejection
// handler: the host calls it with a JSON Rejection payload when the command
// gateway rejects a command the saga's handling sent (ABI.md, Sagas).
const EventCommandRejected = "berth.CommandRejected"
