package abi

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// CapsuleFormat names the capsule format and its version, the first field
// of every capsule file. A reader refuses a capsule of another format; a
// later minor change only adds fields, which readers of this one ignore.
const CapsuleFormat = "berth-capsule/1"

// Capsule is the recording of one failed attempt: everything the guest was
// given (the event, each host call's answer, the clock readings and the
// random bytes) and what came of it, so that the attempt can be run again
// elsewhere with the same inputs (ABI.md, Attempt capsules). It is JSON.
type Capsule struct {
	// Format is CapsuleFormat.
	Format string `json:"format"`
	// RecordedAt is when the attempt ended, by the host's clock.
	RecordedAt time.Time `json:"recorded_at"`
	// Host is the host that ran the attempt; Subscription its subscription.
	Host         string `json:"host,omitempty"`
	Subscription string `json:"subscription,omitempty"`
	// Module is the module version that ran the attempt.
	Module CapsuleModule `json:"module"`
	// Limits are the limits the attempt ran under; a replay runs under them.
	Limits CapsuleLimits `json:"limits"`
	// Event is the envelope exactly as the guest received it (attempt,
	// invocation key and deadline included).
	Event CapsuleEvent `json:"event"`
	// Calls are the guest's host calls in the order it made them.
	Calls []CapsuleCall `json:"calls"`
	// Clock holds the clock readings the guest was given, in order.
	Clock CapsuleClock `json:"clock"`
	// Random holds the random bytes the guest was given, in order.
	Random Blob `json:"random,omitempty"`
	// Outcome is how the attempt ended.
	Outcome CapsuleOutcome `json:"outcome"`
	// RedactedHeaders names the HTTP headers whose values were not kept
	// (each such value reads "[redacted]").
	RedactedHeaders []string `json:"redacted_headers,omitempty"`
	// RedactedConfig names the config keys whose values were not kept (the
	// reply's body reads "[redacted]", and a replay gives the guest that).
	RedactedConfig []string `json:"redacted_config,omitempty"`
	// Truncated says what the capsule's size cap left out, if anything; a
	// capsule with notes here may not replay the whole attempt.
	Truncated []string `json:"truncated,omitempty"`
}

// CapsuleModule names a module version by its name, version and the
// sha256 of its bytes (hex).
type CapsuleModule struct {
	Name    string `json:"name"`
	Version int    `json:"version,omitempty"`
	SHA256  string `json:"sha256,omitempty"`
}

// CapsuleLimits are the limits an attempt ran under.
type CapsuleLimits struct {
	// TimeoutMillis is the attempt's time budget.
	TimeoutMillis int64 `json:"timeout_ms"`
	// MemoryLimitPages is the module's memory limit in 64 KiB pages.
	MemoryLimitPages uint32 `json:"memory_limit_pages"`
	// AllowedHosts are the hosts the module could reach.
	AllowedHosts []string `json:"allowed_hosts,omitempty"`
	// MaxResponseBytes is the host's cap on an HTTP response body
	// (sandbox.max-response); 0: not recorded (an older capsule).
	MaxResponseBytes int64 `json:"max_response_bytes,omitempty"`
}

// CapsuleEvent is an Event in a capsule's JSON.
type CapsuleEvent struct {
	Handler          string `json:"handler"`
	InvocationKey    string `json:"invocation_key"`
	Attempt          uint32 `json:"attempt"`
	Type             string `json:"type"`
	AggregateType    string `json:"aggregate_type"`
	AggregateID      string `json:"aggregate_id"`
	Version          uint64 `json:"version"`
	Index            uint32 `json:"index"`
	OwnerID          string `json:"owner_id,omitempty"`
	Position         uint64 `json:"position"`
	TimeUnixNano     int64  `json:"time_unix_nano"`
	DeadlineUnixNano int64  `json:"deadline_unix_nano"`
	Payload          Blob   `json:"payload"`
}

// CapsuleEventOf returns ev as a capsule holds it (Payload copied).
func CapsuleEventOf(ev *Event) CapsuleEvent {
	return CapsuleEvent{
		Handler: ev.Handler, InvocationKey: ev.InvocationKey, Attempt: ev.Attempt, Type: ev.Type,
		AggregateType: ev.AggregateType, AggregateID: ev.AggregateID, Version: ev.Version, Index: ev.Index,
		OwnerID: ev.OwnerID, Position: ev.Position, TimeUnixNano: ev.TimeUnixNano,
		DeadlineUnixNano: ev.DeadlineUnixNano, Payload: append(Blob(nil), ev.Payload...),
	}
}

// ToEvent returns the envelope the guest received.
func (e *CapsuleEvent) ToEvent() Event {
	return Event{
		Handler: e.Handler, InvocationKey: e.InvocationKey, Attempt: e.Attempt, Type: e.Type,
		AggregateType: e.AggregateType, AggregateID: e.AggregateID, Version: e.Version, Index: e.Index,
		OwnerID: e.OwnerID, Position: e.Position, TimeUnixNano: e.TimeUnixNano,
		DeadlineUnixNano: e.DeadlineUnixNano, Payload: []byte(e.Payload),
	}
}

// Host call names in a capsule (CapsuleCall.Fn).
const (
	CallHTTP     = "http"
	CallKVGet    = "kv_get"
	CallKVPut    = "kv_put"
	CallKVDelete = "kv_delete"
	CallCommand  = "command"
	CallConfig   = "config"
	CallLog      = "log"
)

// CapsuleCall is one host call: what the guest asked (the field of its Fn)
// and the reply it got. A log line has no reply.
type CapsuleCall struct {
	// Fn is one of the Call constants.
	Fn string `json:"fn"`
	// HTTP is an http call's request and, when Reply.Code is ok, response.
	HTTP *CapsuleHTTP `json:"http,omitempty"`
	// Key is a kv_get, kv_put, kv_delete or config call's key.
	Key string `json:"key,omitempty"`
	// Value is a kv_put's value.
	Value Blob `json:"value,omitempty"`
	// Command is a command call's command.
	Command *CapsuleCommand `json:"command,omitempty"`
	// Log is a log call's line.
	Log *CapsuleLog `json:"log,omitempty"`
	// Reply is the host's answer; for an http call that got a response,
	// Reply.Body is empty and HTTP.Response holds it.
	Reply *CapsuleReply `json:"reply,omitempty"`
	// Deadline is set on the call during which the attempt's deadline
	// passed: the guest never ran again after it.
	Deadline bool `json:"deadline,omitempty"`
}

// CapsuleHTTP is an outbound HTTP exchange.
type CapsuleHTTP struct {
	Method   string          `json:"method"`
	URL      string          `json:"url"`
	Headers  []Header        `json:"headers,omitempty"`
	Body     Blob            `json:"body,omitempty"`
	Response *CapsuleHTTPRes `json:"response,omitempty"`
}

// CapsuleHTTPRes is the response an HTTP call got.
type CapsuleHTTPRes struct {
	Status  uint32   `json:"status"`
	Headers []Header `json:"headers,omitempty"`
	Body    Blob     `json:"body,omitempty"`
}

// CapsuleCommand is a command a saga sent.
type CapsuleCommand struct {
	AggregateType string `json:"aggregate_type"`
	AggregateID   string `json:"aggregate_id"`
	Type          string `json:"type"`
	Payload       Blob   `json:"payload,omitempty"`
}

// CapsuleLog is a log line: its level (debug, info, warn, error) and text
// as the guest wrote it (structured fields included, ABI.md log).
type CapsuleLog struct {
	Level string `json:"level"`
	Text  Blob   `json:"text"`
}

// CapsuleReply is a host call's Reply with its code by name.
type CapsuleReply struct {
	Code             string `json:"code"`
	Message          string `json:"message,omitempty"`
	RetryAfterMillis uint64 `json:"retry_after_ms,omitempty"`
	Body             Blob   `json:"body,omitempty"`
}

// CapsuleClock holds clock readings in the order the guest took them:
// the wall clock's (unix nanoseconds) and the monotonic clock's
// (nanoseconds). A replay gives them back in order and, past the last,
// goes on from it at real speed.
type CapsuleClock struct {
	Walltime []int64 `json:"walltime,omitempty"`
	Nanotime []int64 `json:"nanotime,omitempty"`
}

// CapsuleOutcome is how an attempt ended: Kind as the sandbox names it
// (failure, timeout, trap, memory-exceeded), the guest's failure for a
// failure, and the guest's output (bounded).
type CapsuleOutcome struct {
	Kind             string   `json:"kind"`
	Classes          []string `json:"classes,omitempty"`
	FailureKind      string   `json:"failure_kind,omitempty"`
	Message          string   `json:"message,omitempty"`
	Code             string   `json:"code,omitempty"`
	RetryAfterMillis uint64   `json:"retry_after_ms,omitempty"`
	Stdout           string   `json:"stdout,omitempty"`
	Stderr           string   `json:"stderr,omitempty"`
}

// replyCodes names the Reply codes in capsules.
var replyCodes = []string{
	ReplyOK: "ok", ReplyNotFound: "not_found", ReplyDenied: "denied", ReplyRefused: "refused",
	ReplyTimeout: "timeout", ReplyUnsupported: "unsupported", ReplyError: "error",
	ReplyTooLarge: "too_large", ReplyBackpressure: "backpressure",
}

// ReplyCodeName names a Reply code as capsules do ("ok", "not_found", …).
func ReplyCodeName(code uint8) string {
	if int(code) < len(replyCodes) {
		return replyCodes[code]
	}
	return fmt.Sprintf("code_%d", code)
}

// ReplyCode returns the code ReplyCodeName names.
func ReplyCode(name string) (uint8, bool) {
	for i, n := range replyCodes {
		if n == name {
			return uint8(i), true
		}
	}
	var c uint8
	if _, err := fmt.Sscanf(name, "code_%d", &c); err == nil {
		return c, true
	}
	return 0, false
}

// CapsuleReplyOf returns r as a capsule holds it (Body copied).
func CapsuleReplyOf(r *Reply) *CapsuleReply {
	return &CapsuleReply{Code: ReplyCodeName(r.Code), Message: r.Message,
		RetryAfterMillis: r.RetryAfterMillis, Body: append(Blob(nil), r.Body...)}
}

// ToReply returns the Reply the guest got (for an http call that got a
// response, Body is the encoded response: see CapsuleCall.Reply).
func (r *CapsuleReply) ToReply() (Reply, error) {
	code, ok := ReplyCode(r.Code)
	if !ok {
		return Reply{}, fmt.Errorf("abi: capsule: unknown reply code %q", r.Code)
	}
	return Reply{Code: code, Message: r.Message, RetryAfterMillis: r.RetryAfterMillis, Body: []byte(r.Body)}, nil
}

// Blob is bytes in a capsule's JSON: a JSON string of the bytes themselves
// when they are UTF-8 text (and do not begin with "base64:"), else
// "base64:" and their standard base64 encoding.
type Blob []byte

const blobBase64 = "base64:"

// MarshalJSON encodes b as text or as "base64:…".
func (b Blob) MarshalJSON() ([]byte, error) {
	s := string(b)
	if !utf8.Valid(b) || strings.HasPrefix(s, blobBase64) {
		s = blobBase64 + base64.StdEncoding.EncodeToString(b)
	}
	return json.Marshal(s)
}

// UnmarshalJSON decodes what MarshalJSON encodes.
func (b *Blob) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("abi: capsule bytes: %w", err)
	}
	if rest, ok := strings.CutPrefix(s, blobBase64); ok {
		v, err := base64.StdEncoding.DecodeString(rest)
		if err != nil {
			return fmt.Errorf("abi: capsule bytes: %w", err)
		}
		*b = v
		return nil
	}
	*b = Blob(s)
	return nil
}

// EncodeCapsule returns c as JSON, Format set to CapsuleFormat.
func EncodeCapsule(c *Capsule) ([]byte, error) {
	c.Format = CapsuleFormat
	return json.MarshalIndent(c, "", "  ")
}

// DecodeCapsule decodes a capsule file, refusing another format, a file
// larger than MaxCapsuleBytes and a capsule that does not Validate.
func DecodeCapsule(b []byte) (*Capsule, error) {
	// A cheap bound first: even indented, a host's capsule is not 4 times
	// its compact size.
	if len(b) > 4*MaxCapsuleBytes || compactLen(b) > MaxCapsuleBytes {
		return nil, fmt.Errorf("abi: not a Berth capsule: %d bytes, and a host records at most %d (capsule.max-bytes)", len(b), MaxCapsuleBytes)
	}
	var head struct {
		Format string `json:"format"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return nil, fmt.Errorf("abi: not a capsule: %w", err)
	}
	if head.Format != CapsuleFormat {
		return nil, fmt.Errorf("abi: capsule format %q, this reader knows %q", head.Format, CapsuleFormat)
	}
	var c Capsule
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("abi: capsule: %w", err)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}
