// Package berthtest is the test kit for Berth handlers: it runs a
// processor's handlers natively under `go test`, no WebAssembly involved,
// with fakes for every port that a test can script to fail.
//
// A Spec calls the handler registered for an event's type exactly once per
// WhenEvent, through the same berth.Processor.Dispatch the WebAssembly glue
// uses, with the envelope the host would build: the invocation key
// "Processor.handler:aggregateType/aggregateId@version:index"
// (berth.InvocationKey), the attempt, the deadline.
// The retry budget itself is the host's: to show that a retry is safe, call
// WhenEvent again with the same event and check what the fakes recorded.
//
//	func TestFailedNotificationIsAskedForAgain(t *testing.T) {
//		spec := berthtest.New(t, Processor())
//		spec.Config["notifications-url"] = "http://notifications.test"
//		spec.HTTP.Fail(errMailDown)
//		spec.WhenEvent(shipped).ExpectErrorIs(errMailDown)
//		spec.WhenEvent(shipped).ExpectNoError()
//		sent := spec.HTTP.Sent()
//		// len(sent) == 1, sent[0].Header["Idempotency-Key"] == "ShipmentNotifier.onOrderShipped:Order/o-1@6:0"
//	}
//
// Like the host, a Spec keeps a saga's commands and a projection's key/value
// writes of one delivery only if the handler succeeds: a failed attempt
// sends no command and leaves the read model as it was. Outbound HTTP
// happens at once, as it does in the host. A command the test scripted to
// be rejected (FakeCommands.Reject) goes to the saga's rejection handler
// (berth.Processor.OnRejected) in the same WhenEvent, as the host calls it.
//
// NewWithRunner makes a Spec whose calls something else runs, with the same
// fakes and the same expectations: github.com/berthhq/berth/hostspec runs
// the compiled module in the host's sandbox that way.
//
// Replay runs a handler against an attempt capsule, the recording a parked
// failure leaves, with ports answering from it: the failure reproduced,
// then the fix's regression test.
package berthtest

import (
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/berthhq/berth/guest-sdk/berth"
	"github.com/berthhq/berth/wasm/abi"
)

// TB is the part of testing.TB a Spec reports through; *testing.T and
// *testing.B satisfy it. Fatalf is used only for mistakes in the test itself
// (an event no handler takes, a payload that does not marshal).
type TB interface {
	Helper()
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// Spec runs one processor's handlers against fake ports. Script the fakes
// before WhenEvent and inspect them after; they persist across calls, as
// the services behind the ports would.
type Spec struct {
	// Processor is the processor under test.
	Processor *berth.Processor
	// HTTP is the outbound HTTP port.
	HTTP *FakeHTTP
	// KV is a projection's read model. Other kinds get berth.ClassUnsupported
	// errors from the port, as from the host.
	KV *FakeKV
	// Commands receives a saga's commands once a delivery succeeds. Other
	// kinds get berth.ClassUnsupported errors from the port, as from the host.
	Commands *FakeCommands
	// Config holds the module's operator-set configuration values.
	Config FakeConfig
	// Log records the lines handlers write, tagged with the invocation key;
	// each line is also written to the test's log.
	Log *FakeLog

	t        TB
	runner   Runner // nil: the handlers run natively (NewWithRunner sets one)
	mu       sync.Mutex
	attempts map[string]int
}

// New returns a Spec for the processor with empty fakes. It fails the test
// at once if the host would refuse the processor at load (see
// berth.Processor.Validate).
func New(t TB, p *berth.Processor) *Spec {
	t.Helper()
	if p == nil {
		t.Fatalf("berthtest: New with a nil processor")
	} else if err := p.Validate(); err != nil {
		t.Fatalf("berthtest: the host would refuse processor %s: %v", p.Name, err)
	}
	return &Spec{
		Processor: p,
		HTTP:      &FakeHTTP{},
		KV:        &FakeKV{},
		Commands:  &FakeCommands{},
		Config:    FakeConfig{},
		Log:       &FakeLog{},
		t:         t,
		attempts:  map[string]int{},
	}
}

// Event describes the event a test delivers. Zero fields stay zero in the
// handler's context, except where noted.
type Event struct {
	Type          string    // the event type; selects the handler
	AggregateType string    // e.g. "Order"
	AggregateID   string    // the aggregate's id, part of the invocation key
	Version       uint64    // the commit's aggregate version; 0 means 1
	Index         int       // the event's index within its commit, from 0
	OwnerID       string    // the aggregate's owner, e.g. the buyer
	Position      uint64    // the commit's global position in the log
	Time          time.Time // when the commit was appended; zero: none

	// Payload is the event body: []byte, json.RawMessage and string are
	// taken as the JSON itself, nil as no body, anything else is marshalled
	// with encoding/json.
	Payload any

	// Handler names the handler to run; empty: the first registered for Type.
	Handler string
	// Attempt is the attempt number the handler sees; 0 counts the
	// deliveries of the same invocation key in this Spec, from 1.
	Attempt int
}

// WhenEvent delivers the event once to the handler registered for its type
// and returns the outcome to assert on.
func (s *Spec) WhenEvent(ev Event) *Then {
	s.t.Helper()
	th := &Then{spec: s, t: s.t}
	h := s.handlerFor(ev)
	if h == nil {
		return th.abort()
	}
	payload, err := toJSON(ev.Payload)
	if err != nil {
		s.t.Fatalf("berthtest: %s payload: %v", ev.Type, err)
		return th.abort()
	}
	if ev.Index < 0 {
		s.t.Fatalf("berthtest: %s has a negative index %d", ev.Type, ev.Index)
		return th.abort()
	}
	version := ev.Version
	if version == 0 {
		version = 1
	}
	key := berth.InvocationKey(s.Processor.Name, h.Name, ev.AggregateType, ev.AggregateID, version, ev.Index)
	attempt := ev.Attempt
	s.mu.Lock()
	s.attempts[key]++
	if attempt == 0 {
		attempt = s.attempts[key]
	}
	s.mu.Unlock()

	env := &abi.Event{
		Handler:       h.Name,
		InvocationKey: key,
		Attempt:       uint32(attempt),
		Type:          ev.Type,
		AggregateType: ev.AggregateType,
		AggregateID:   ev.AggregateID,
		Version:       version,
		Index:         uint32(ev.Index),
		OwnerID:       ev.OwnerID,
		Position:      ev.Position,
		Payload:       payload,
	}
	if !ev.Time.IsZero() {
		env.TimeUnixNano = ev.Time.UnixNano()
	}
	if timeout := s.timeout(h); timeout > 0 {
		env.DeadlineUnixNano = time.Now().Add(timeout).UnixNano()
	}

	d := &delivery{spec: s, key: key}
	res, handlerErr := s.dispatch(h, env, d)
	var sent sendOutcome
	if res.Status == abi.StatusOK {
		sent = s.send(env, d.commit())
		if sent.failed {
			res, handlerErr = sent.res, sent.err
		}
	}

	th.Subscription = s.Processor.Name + "." + h.Name
	th.Key = key
	th.Attempt = attempt
	th.Result = res
	th.Err = handlerErr
	th.Requests = append(d.requestsMade(), sent.requests...)
	th.Commands = sent.commands
	th.Rejections = sent.rejections
	return th
}

// dispatch runs handler h for env with the delivery's ports, through a
// one-handler copy of the processor whose handler remembers the error it
// returned, so that ExpectErrorIs can look into it; or through the Spec's
// Runner, if it has one.
func (s *Spec) dispatch(h *berth.Handler, env *abi.Event, d *delivery) (abi.Result, error) {
	if s.runner != nil {
		return s.run(env, d)
	}
	return runNative(s.Processor, h, env, d.ports())
}

// handlerFor finds the handler the event goes to, failing the test if none.
func (s *Spec) handlerFor(ev Event) *berth.Handler {
	s.t.Helper()
	p := s.Processor
	if p == nil {
		s.t.Fatalf("berthtest: the spec has no processor")
		return nil
	}
	if ev.Handler == "" {
		h := p.HandlerFor(ev.Type)
		if h == nil {
			s.t.Fatalf("berthtest: processor %s has no handler for %q events", p.Name, ev.Type)
		}
		return h
	}
	h := p.Handler(ev.Handler)
	if h == nil {
		s.t.Fatalf("berthtest: processor %s has no handler %q", p.Name, ev.Handler)
		return nil
	}
	for _, t := range h.EventTypes {
		if t == ev.Type {
			return h
		}
	}
	s.t.Fatalf("berthtest: handler %s.%s does not handle %q events", p.Name, h.Name, ev.Type)
	return nil
}

// timeout is the handler's Timeout, or else the processor's: the host's
// deadline for one attempt (zero: the host's default, unknown here).
func (s *Spec) timeout(h *berth.Handler) time.Duration {
	if h.Retry.Timeout > 0 {
		return h.Retry.Timeout
	}
	return s.Processor.Retry.Timeout
}

// toJSON turns a payload or a value into its JSON bytes.
func toJSON(v any) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return nil, nil
	case []byte:
		return v, nil
	case json.RawMessage:
		return v, nil
	case string:
		return []byte(v), nil
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("marshal %T: %w", v, err)
		}
		return b, nil
	}
}
