package abi

import (
	"bytes"
	"fmt"
)

// ErrNotRecorded is the message of the error reply a replay gives a host
// call its capsule has no answer for.
const ErrNotRecorded = "not recorded in the capsule"

// CapsuleMatcher answers a replay's host calls from a capsule's recorded
// calls, as ABI.md's Replay says, for every replayer (the host's sandbox,
// the guest test kits): a call gets the first recorded call not yet used
// (log lines aside) if it asks the same (SameRequest); else a later unused
// one that does, a departure "out of order"; else none, a departure "not
// recorded". It is not safe for concurrent use.
type CapsuleMatcher struct {
	recorded []CapsuleCall
	used     []bool
	low      int // the recorded calls before it are used or log lines
}

// NewCapsuleMatcher returns a matcher over recorded, none of it used.
func NewCapsuleMatcher(recorded []CapsuleCall) *CapsuleMatcher {
	return &CapsuleMatcher{recorded: recorded, used: make([]bool, len(recorded))}
}

// Match finds the recorded call that answers made and marks it used. It
// returns its index (-1: none), the index of the recorded call that was
// due (-1: none was left) and, when the call departed from the recording,
// what the departure was ("" when it was answered in order).
func (m *CapsuleMatcher) Match(made *CapsuleCall) (j, due int, departure string) {
	for m.low < len(m.recorded) && (m.used[m.low] || m.recorded[m.low].Fn == CallLog) {
		m.low++
	}
	due = -1
	if m.low < len(m.recorded) {
		due = m.low
	}
	for k := m.low; k < len(m.recorded); k++ {
		if m.used[k] || !SameRequest(&m.recorded[k], made) {
			continue
		}
		m.used[k] = true
		if k != due {
			return k, due, fmt.Sprintf("out of order: answered as recorded call #%d", k)
		}
		return k, due, ""
	}
	return -1, due, fmt.Sprintf("not recorded: answered error %q", ErrNotRecorded)
}

// SameRequest reports whether two calls ask the same: the same Fn and, for
// HTTP, method (none is GET), URL and body — headers are not compared;
// for a command, the command; else key and value.
func SameRequest(a, b *CapsuleCall) bool {
	if a.Fn != b.Fn {
		return false
	}
	switch a.Fn {
	case CallHTTP:
		if a.HTTP == nil || b.HTTP == nil {
			return a.HTTP == nil && b.HTTP == nil
		}
		return HTTPMethod(a.HTTP.Method) == HTTPMethod(b.HTTP.Method) && a.HTTP.URL == b.HTTP.URL &&
			bytes.Equal(a.HTTP.Body, b.HTTP.Body)
	case CallCommand:
		if a.Command == nil || b.Command == nil {
			return a.Command == nil && b.Command == nil
		}
		x, y := a.Command, b.Command
		return x.AggregateType == y.AggregateType && x.AggregateID == y.AggregateID && x.Type == y.Type &&
			bytes.Equal(x.Payload, y.Payload)
	}
	return a.Key == b.Key && bytes.Equal(a.Value, b.Value)
}

// HTTPMethod is the method a host sends for an http_request of method m:
// GET when none is given.
func HTTPMethod(m string) string {
	if m == "" {
		return "GET"
	}
	return m
}

// RecordedReply returns the Reply a recorded call gave the guest; for an
// HTTP call with a response, the response is c.HTTP.Response, not in Body.
// A call with no reply, or one that does not read, answers an error.
func (c *CapsuleCall) RecordedReply() Reply {
	if c.Reply == nil {
		return Reply{Code: ReplyError, Message: "the capsule has no reply for this call"}
	}
	r, err := c.Reply.ToReply()
	if err != nil {
		return Reply{Code: ReplyError, Message: err.Error()}
	}
	return r
}
