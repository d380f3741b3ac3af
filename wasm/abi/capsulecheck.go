package abi

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"
)

// MaxCapsuleBytes bounds a capsule file a reader takes: 1 MiB, the most a
// host ever records (capsule.max-bytes is at most 1 MiB, and the failure
// ledger keeps no larger capsule). It is measured without the JSON's
// insignificant white space, so that an indented copy of a host's capsule
// still reads. A larger file is not a capsule a host made.
const MaxCapsuleBytes = 1 << 20

// MaxMemoryPages is the most 64 KiB pages a 32-bit WebAssembly memory can
// have (4 GiB).
const MaxMemoryPages = 65536

// maxTimeoutMillis is the longest time budget a capsule may name: the
// longest a time.Duration holds.
const maxTimeoutMillis = math.MaxInt64 / int64(time.Millisecond)

// capsuleKinds are the outcome kinds a capsule may say (ABI.md, The outcome).
var capsuleKinds = []string{"failure", "timeout", "trap", "memory-exceeded", "success", "canceled"}

// logLevels are the log levels a capsule's log lines may say.
var logLevels = []string{"debug", "info", "warn", "error"}

// calls are the host call names a capsule's calls may say.
var calls = []string{CallHTTP, CallKVGet, CallKVPut, CallKVDelete, CallCommand, CallConfig, CallLog}

// Validate checks every field of c that a replay uses against what a host
// could have recorded, and returns an error naming the first field that is
// not (its JSON path, "limits.memory_limit_pages", "calls[3].reply.code").
// A recorded answer larger than a host could have delivered (an HTTP body
// past limits.max_response_bytes, any reply past MaxFieldLen) makes the
// capsule impossible; the error names the call.
func (c *Capsule) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("abi: capsule: %s: %s", field, fmt.Sprintf(format, args...))
	}
	if c.Format != CapsuleFormat {
		return bad("format", "%q, this reader knows %q", c.Format, CapsuleFormat)
	}
	if c.Module.Name == "" {
		return bad("module.name", "empty: a capsule names the module that made it")
	}
	if c.Module.Version < 0 {
		return bad("module.version", "%d is negative", c.Module.Version)
	}
	if s := c.Module.SHA256; s != "" {
		if _, err := hex.DecodeString(s); err != nil || len(s) != 64 {
			return bad("module.sha256", "%q is not 64 hex digits", s)
		}
	}
	l := &c.Limits
	if l.TimeoutMillis < 0 || l.TimeoutMillis > maxTimeoutMillis {
		return bad("limits.timeout_ms", "%d is out of range [0, %d]", l.TimeoutMillis, maxTimeoutMillis)
	}
	if l.MemoryLimitPages > MaxMemoryPages {
		return bad("limits.memory_limit_pages", "%d is more than a 32-bit WebAssembly memory has (%d pages, 4 GiB)", l.MemoryLimitPages, MaxMemoryPages)
	}
	if l.MaxResponseBytes < 0 || l.MaxResponseBytes > MaxFieldLen {
		return bad("limits.max_response_bytes", "%d is out of range [0, %d]", l.MaxResponseBytes, MaxFieldLen)
	}
	for i, h := range l.AllowedHosts {
		if h == "" {
			return bad(fmt.Sprintf("limits.allowed_hosts[%d]", i), "empty")
		}
	}
	if c.Event.Handler == "" {
		return bad("event.handler", "empty: the event names the handler it was for")
	}
	if len(c.Event.Payload) > MaxFieldLen {
		return bad("event.payload", "%d bytes, more than the ABI carries (%d)", len(c.Event.Payload), MaxFieldLen)
	}
	for i := range c.Calls {
		if err := c.Calls[i].validate(l); err != nil {
			return fmt.Errorf("abi: capsule: calls[%d] (%s): %w", i, c.Calls[i].describe(), err)
		}
	}
	if !slices.Contains(capsuleKinds, c.Outcome.Kind) {
		return bad("outcome.kind", "%q is none of %q", c.Outcome.Kind, capsuleKinds)
	}
	return nil
}

// describe names a call in an error: "http GET https://…", "kv_get k".
func (cc *CapsuleCall) describe() string {
	switch {
	case cc.HTTP != nil:
		return fmt.Sprintf("%s %s %s", cc.Fn, cc.HTTP.Method, cc.HTTP.URL)
	case cc.Key != "":
		return cc.Fn + " " + cc.Key
	}
	return cc.Fn
}

// validate checks one recorded call: its fn, the field of its fn, its
// reply's code and that the answer is one a host could have given.
func (cc *CapsuleCall) validate(l *CapsuleLimits) error {
	if !slices.Contains(calls, cc.Fn) {
		return fmt.Errorf("fn %q is none of %q", cc.Fn, calls)
	}
	if cc.Fn == CallLog {
		if cc.Log == nil {
			return fmt.Errorf("log: absent from a log line")
		}
		if !slices.Contains(logLevels, cc.Log.Level) {
			return fmt.Errorf("log.level %q is none of %q", cc.Log.Level, logLevels)
		}
		return nil
	}
	if cc.Reply == nil {
		// The call the deadline passed in may have none; a replay answers
		// it an error (RecordedReply), and an http response needs one.
		if cc.HTTP != nil && cc.HTTP.Response != nil {
			return fmt.Errorf("http.response: only an http call answered ok has one")
		}
		return nil
	}
	code, ok := ReplyCode(cc.Reply.Code)
	if !ok {
		return fmt.Errorf("reply.code %q is no reply code", cc.Reply.Code)
	}
	if n := len(cc.Reply.Body); n > MaxFieldLen {
		return fmt.Errorf("reply.body: %d bytes, more than a reply carries (%d): no host could have answered it", n, MaxFieldLen)
	}
	if cc.HTTP == nil || cc.HTTP.Response == nil {
		return nil
	}
	if cc.Fn != CallHTTP || code != ReplyOK {
		return fmt.Errorf("http.response: only an http call answered ok has one")
	}
	res := cc.HTTP.Response
	if res.Status < 100 || res.Status > 999 {
		return fmt.Errorf("http.response.status %d is no HTTP status", res.Status)
	}
	limit, what := int64(MaxFieldLen), "a reply carries"
	if l.MaxResponseBytes > 0 {
		limit, what = l.MaxResponseBytes, "the host delivered (limits.max_response_bytes)"
	}
	if n := int64(len(res.Body)); n > limit {
		return fmt.Errorf("http.response.body: %d bytes, more than %s (%d): no host could have answered it", n, what, limit)
	}
	if n := len(AppendHTTPResponse(nil, &HTTPResponse{Status: res.Status, Headers: res.Headers, Body: res.Body})); n > MaxFieldLen {
		return fmt.Errorf("http.response: %d bytes encoded, more than a reply carries (%d): no host could have answered it", n, MaxFieldLen)
	}
	return nil
}

// compactLen is the length of JSON b without its insignificant white
// space (b's length when b is not JSON: the decoder says why).
func compactLen(b []byte) int {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return len(b)
	}
	return buf.Len()
}
