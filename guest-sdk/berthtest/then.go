package berthtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/berthhq/berth/guest-sdk/berth"
	"github.com/berthhq/berth/wasm/abi"
)

// Then is the outcome of one WhenEvent. Its Expect methods report a
// mismatch with Errorf, so one test shows every mismatch, and return the
// Then for chaining. The fields are there for checks of your own.
type Then struct {
	// Subscription is "Processor.handler", the subscription that ran.
	Subscription string
	// Key is the invocation key the handler was given.
	Key string
	// Attempt is the attempt number the handler was given.
	Attempt int
	// Result is what the host reads back: the status and, for a failure,
	// its kind, class chain, message, code and retry-after.
	Result abi.Result
	// Err is the error the handler returned (nil on success or a panic).
	// With a Runner (NewWithRunner) it is the failure rebuilt as a
	// *berth.Error, nil on success.
	Err error
	// Requests are the HTTP requests this delivery made, failed ones included.
	Requests []berth.Request
	// Commands are the commands this delivery sent, in order, with those its
	// rejection handler sent after each rejection: none if the handler
	// failed (a failed rejection handler's own commands are not sent).
	Commands []berth.Command
	// Rejections are the commands of this delivery the gateway rejected.
	Rejections []berth.Rejection

	spec    *Spec
	t       TB
	aborted bool // WhenEvent failed the test already; expectations are moot
}

func (th *Then) abort() *Then {
	th.aborted = true
	return th
}

// Failed reports whether the handler failed.
func (th *Then) Failed() bool { return th.Result.Status == abi.StatusFailed }

func (th *Then) errorf(format string, args ...any) {
	th.t.Helper()
	th.t.Errorf("%s: %s", th.Key, fmt.Sprintf(format, args...))
}

// outcome describes what the handler did, for a report.
func (th *Then) outcome() string {
	if !th.Failed() {
		return "it succeeded"
	}
	f := th.Result.Failure
	var b strings.Builder
	b.WriteString("it failed")
	if len(f.Classes) > 0 {
		fmt.Fprintf(&b, " with class %s", strings.Join(f.Classes, " < "))
	}
	if f.Kind != abi.KindUnspecified {
		fmt.Fprintf(&b, ", %s", f.Kind)
	}
	if f.RetryAfterMillis > 0 {
		fmt.Fprintf(&b, ", retry after %dms", f.RetryAfterMillis)
	}
	if f.Code != "" {
		fmt.Fprintf(&b, ", code %s", f.Code)
	}
	fmt.Fprintf(&b, ": %s", f.Message)
	return b.String()
}

// ExpectNoError checks that the handler succeeded.
func (th *Then) ExpectNoError() *Then {
	th.t.Helper()
	if !th.aborted && th.Failed() {
		th.errorf("want no error, but %s", th.outcome())
	}
	return th
}

// ExpectError checks that the handler failed, for any reason.
func (th *Then) ExpectError() *Then {
	th.t.Helper()
	if !th.aborted && !th.Failed() {
		th.errorf("want an error, but it succeeded")
	}
	return th
}

// ExpectErrorIs checks that the handler returned an error matching target
// with errors.Is. An
// *berth.ErrorClass target matches a failure of that class or a subclass.
func (th *Then) ExpectErrorIs(target error) *Then {
	th.t.Helper()
	if !th.aborted && !errors.Is(th.Err, target) {
		th.errorf("want an error matching %q, but %s", target, th.outcome())
	}
	return th
}

// ExpectErrorClass checks that the handler failed with the class or one of
// its subclasses, by the class chain the host reads (so the host's
// unrecoverable and recoverable lists see the same).
func (th *Then) ExpectErrorClass(class *berth.ErrorClass) *Then {
	th.t.Helper()
	if !th.aborted && (!th.Failed() || !slices.Contains(th.Result.Failure.Classes, class.Name())) {
		th.errorf("want an error of class %s, but %s", class.Name(), th.outcome())
	}
	return th
}

// ExpectSystemic checks that the handler reported a systemic failure: an
// outage the host waits out by pausing the partition, spending no budget.
func (th *Then) ExpectSystemic() *Then {
	th.t.Helper()
	if !th.aborted && (!th.Failed() || th.Result.Failure.Kind != abi.KindSystemic) {
		th.errorf("want a systemic failure, but %s", th.outcome())
	}
	return th
}

// ExpectBackpressure checks that the handler reported backpressure with the
// retry-after floor, which the host reads in whole milliseconds, rounded up
// (0: no floor).
func (th *Then) ExpectBackpressure(retryAfter time.Duration) *Then {
	th.t.Helper()
	want := uint64((retryAfter + time.Millisecond - 1) / time.Millisecond)
	f := th.Result.Failure
	if !th.aborted && (!th.Failed() || f.Kind != abi.KindBackpressure || f.RetryAfterMillis != want) {
		th.errorf("want backpressure, retry after %dms, but %s", want, th.outcome())
	}
	return th
}

// ExpectRequest checks that the delivery made at least one HTTP request
// with the method and URL.
func (th *Then) ExpectRequest(method, url string) *Then {
	th.t.Helper()
	if th.aborted {
		return th
	}
	for _, r := range th.Requests {
		if r.Method == method && r.URL == url {
			return th
		}
	}
	th.errorf("want a request %s %s, but it made %s", method, url, requestList(th.Requests))
	return th
}

// ExpectNoRequest checks that the delivery made no HTTP request.
func (th *Then) ExpectNoRequest() *Then {
	th.t.Helper()
	if !th.aborted && len(th.Requests) > 0 {
		th.errorf("want no request, but it made %s", requestList(th.Requests))
	}
	return th
}

func requestList(rs []berth.Request) string {
	if len(rs) == 0 {
		return "none"
	}
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = r.Method + " " + r.URL
	}
	return strings.Join(s, ", ")
}

// Command describes a command ExpectCommand looks for. Empty fields match
// any value; a non-nil Payload is encoded as Event.Payload is and compared
// as JSON (so key order and spacing do not matter).
type Command struct {
	AggregateType string
	AggregateID   string
	Type          string
	Payload       any
}

func (c Command) matches(cmd berth.Command) bool {
	if (c.AggregateType != "" && c.AggregateType != cmd.AggregateType) ||
		(c.AggregateID != "" && c.AggregateID != cmd.AggregateID) ||
		(c.Type != "" && c.Type != cmd.Type) {
		return false
	}
	return c.Payload == nil || jsonEqual(cmd.Payload, c.Payload)
}

// ExpectCommand checks that the delivery sent a command matching want (a
// saga's commands are sent only when the handler succeeds).
func (th *Then) ExpectCommand(want Command) *Then {
	th.t.Helper()
	if th.aborted {
		return th
	}
	for _, c := range th.Commands {
		if want.matches(c) {
			return th
		}
	}
	th.errorf("want a command %s, but it sent %s", commandString(want.AggregateType, want.AggregateID, want.Type, want.Payload), commandList(th.Commands))
	return th
}

// ExpectNoCommand checks that the delivery sent no command.
func (th *Then) ExpectNoCommand() *Then {
	th.t.Helper()
	if !th.aborted && len(th.Commands) > 0 {
		th.errorf("want no command, but it sent %s", commandList(th.Commands))
	}
	return th
}

func commandString(aggType, aggID, typ string, payload any) string {
	s := fmt.Sprintf("%s to %s %s", orAny(typ), orAny(aggType), orAny(aggID))
	if b, err := toJSON(payload); err == nil && b != nil {
		s += " " + string(b)
	}
	return s
}

func orAny(s string) string {
	if s == "" {
		return "*"
	}
	return s
}

func commandList(cs []berth.Command) string {
	if len(cs) == 0 {
		return "none"
	}
	s := make([]string, len(cs))
	for i, c := range cs {
		s[i] = commandString(c.AggregateType, c.AggregateID, c.Type, c.Payload)
	}
	return strings.Join(s, "; ")
}

// ExpectState checks that the read model holds want under key after the
// delivery. want is encoded as Event.Payload is; values that are both valid
// JSON are compared as JSON, others byte for byte.
func (th *Then) ExpectState(key string, want any) *Then {
	th.t.Helper()
	if th.aborted {
		return th
	}
	got, ok := th.spec.KV.Value(key)
	if !ok {
		th.errorf("want state %s = %s, but it has none", key, stateString(want))
		return th
	}
	if !jsonEqual(got, want) {
		th.errorf("want state %s = %s, but it is %s", key, stateString(want), got)
	}
	return th
}

// ExpectNoState checks that the read model holds nothing under key after
// the delivery.
func (th *Then) ExpectNoState(key string) *Then {
	th.t.Helper()
	if th.aborted {
		return th
	}
	if got, ok := th.spec.KV.Value(key); ok {
		th.errorf("want no state %s, but it is %s", key, got)
	}
	return th
}

func stateString(v any) string {
	b, err := toJSON(v)
	if err != nil {
		return fmt.Sprintf("%v (%v)", v, err)
	}
	return string(b)
}

// jsonEqual compares got with want encoded as toJSON does: as JSON values if
// both are valid JSON, else byte for byte.
func jsonEqual(got []byte, want any) bool {
	w, err := toJSON(want)
	if err != nil {
		return false
	}
	var gv, wv any
	if json.Unmarshal(got, &gv) == nil && json.Unmarshal(w, &wv) == nil {
		return reflect.DeepEqual(gv, wv)
	}
	return bytes.Equal(got, w)
}
