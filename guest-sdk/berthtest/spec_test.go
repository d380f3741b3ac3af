package berthtest_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/guest-sdk/berth"
	"github.com/berthhq/berth/guest-sdk/berthtest"
)

// recorder is a TB that records what a Spec reports, so that a test can
// check that an expectation fails when it should.
type recorder struct {
	errors, fatals, logs []string
}

func (r *recorder) Helper() {}
func (r *recorder) Logf(format string, args ...any) {
	r.logs = append(r.logs, fmt.Sprintf(format, args...))
}
func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.fatals = append(r.fatals, fmt.Sprintf(format, args...))
}

var (
	notification = berth.NewErrorClass("Notification", nil)
	unknownBuyer = berth.NewErrorClass("UnknownBuyer", notification)
	errBoom      = errors.New("boom")
)

// reactor has one handler per behaviour, each for its own event type.
func reactor() *berth.Processor {
	p := &berth.Processor{Name: "R", Kind: berth.Reactor, Retry: berth.Retry{Timeout: time.Minute}}
	p.On("ok", "Ok", func(*berth.Context) error { return nil })
	p.On("plain", "Plain", func(*berth.Context) error { return fmt.Errorf("wrapped: %w", errBoom) })
	p.On("classed", "Classed", func(*berth.Context) error { return unknownBuyer.New("who?").WithCode("E404") })
	p.On("systemic", "Systemic", func(*berth.Context) error { return berth.Systemic(errBoom) })
	p.On("busy", "Busy", func(*berth.Context) error {
		return berth.Backpressure(notification.New("busy"), 1500*time.Millisecond)
	})
	p.On("panics", "Panics", func(*berth.Context) error { panic("kaboom") })
	p.On("calls", "Calls", func(c *berth.Context) error {
		_, err := c.HTTP.Do(&berth.Request{Method: "POST", URL: "http://svc.test/" + c.Event.AggregateID})
		return err
	})
	p.On("kv", "KV", func(c *berth.Context) error { return c.KV.Put("k", []byte("v")) })
	p.On("command", "Command", func(c *berth.Context) error {
		return c.Commands.Send(berth.Command{AggregateType: "Stock", AggregateID: "s", Type: "Reserve"})
	})
	return p
}

func TestExpectations(t *testing.T) {
	tests := []struct {
		event   string
		expect  func(*berthtest.Then)
		wantErr string // "" if the expectation holds
	}{
		{"Ok", func(th *berthtest.Then) { th.ExpectNoError() }, ""},
		{"Ok", func(th *berthtest.Then) { th.ExpectError() }, "want an error, but it succeeded"},
		{"Plain", func(th *berthtest.Then) { th.ExpectNoError() }, "want no error, but it failed: wrapped: boom"},
		{"Plain", func(th *berthtest.Then) { th.ExpectError().ExpectErrorIs(errBoom) }, ""},
		{"Plain", func(th *berthtest.Then) { th.ExpectErrorClass(notification) }, "want an error of class Notification, but it failed: wrapped: boom"},
		{"Classed", func(th *berthtest.Then) { th.ExpectErrorClass(unknownBuyer).ExpectErrorClass(notification) }, ""},
		{"Classed", func(th *berthtest.Then) { th.ExpectErrorIs(notification) }, ""},
		{"Classed", func(th *berthtest.Then) { th.ExpectErrorClass(berth.ClassHost) }, "it failed with class UnknownBuyer < Notification, code E404: who?"},
		{"Classed", func(th *berthtest.Then) { th.ExpectErrorIs(errBoom) }, `want an error matching "boom"`},
		{"Ok", func(th *berthtest.Then) { th.ExpectErrorClass(notification) }, "want an error of class Notification, but it succeeded"},
		{"Systemic", func(th *berthtest.Then) { th.ExpectSystemic().ExpectErrorIs(errBoom) }, ""},
		{"Classed", func(th *berthtest.Then) { th.ExpectSystemic() }, "want a systemic failure"},
		{"Busy", func(th *berthtest.Then) {
			th.ExpectBackpressure(1500 * time.Millisecond).ExpectErrorClass(notification)
		}, ""},
		{"Busy", func(th *berthtest.Then) { th.ExpectBackpressure(2 * time.Second) }, "want backpressure, retry after 2000ms, but it failed with class Notification, backpressure, retry after 1500ms: busy"},
		{"Systemic", func(th *berthtest.Then) { th.ExpectBackpressure(0) }, "want backpressure, retry after 0ms, but it failed, systemic: boom"},
		{"Panics", func(th *berthtest.Then) { th.ExpectErrorClass(berth.ClassPanic) }, ""},
		{"Panics", func(th *berthtest.Then) { th.ExpectNoError() }, "it failed with class berth.Panic: panic: kaboom"},
		{"Calls", func(th *berthtest.Then) { th.ExpectRequest("POST", "http://svc.test/a1") }, ""},
		{"Calls", func(th *berthtest.Then) { th.ExpectRequest("GET", "http://svc.test/a1") }, "want a request GET http://svc.test/a1, but it made POST http://svc.test/a1"},
		{"Calls", func(th *berthtest.Then) { th.ExpectNoRequest() }, "want no request, but it made POST http://svc.test/a1"},
		{"Ok", func(th *berthtest.Then) { th.ExpectNoRequest() }, ""},
		{"Ok", func(th *berthtest.Then) { th.ExpectRequest("GET", "http://x") }, "but it made none"},
		{"KV", func(th *berthtest.Then) { th.ExpectErrorClass(berth.ClassUnsupported).ExpectNoState("k") }, ""},
		{"Command", func(th *berthtest.Then) { th.ExpectErrorClass(berth.ClassUnsupported).ExpectNoCommand() }, ""},
	}
	for _, tt := range tests {
		name := tt.event
		if tt.wantErr != "" {
			name += " fails"
		}
		t.Run(name, func(t *testing.T) {
			r := &recorder{}
			spec := berthtest.New(r, reactor())
			tt.expect(spec.WhenEvent(berthtest.Event{Type: tt.event, AggregateID: "a1"}))
			if len(r.fatals) > 0 {
				t.Fatalf("fatal: %v", r.fatals)
			}
			switch {
			case tt.wantErr == "" && len(r.errors) > 0:
				t.Errorf("unexpected report: %v", r.errors)
			case tt.wantErr != "" && (len(r.errors) != 1 || !strings.Contains(r.errors[0], tt.wantErr)):
				t.Errorf("reports = %q, want one containing %q", r.errors, tt.wantErr)
			case tt.wantErr != "" && !strings.HasPrefix(r.errors[0], "R."):
				t.Errorf("report %q does not start with the invocation key", r.errors[0])
			}
		})
	}
}

func TestTheEnvelopeIsTheHosts(t *testing.T) {
	var got []*berth.Context
	p := &berth.Processor{Name: "ShipmentNotifier", Kind: berth.Reactor, Retry: berth.Retry{Timeout: time.Hour}}
	p.On("onOrderShipped", "OrderShipped", func(c *berth.Context) error { got = append(got, c); return nil })
	p.On("audit", "OrderShipped", func(c *berth.Context) error { got = append(got, c); return nil }, berth.Retry{Timeout: time.Second})
	spec := berthtest.New(t, p)
	at := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	ev := berthtest.Event{
		Type: "OrderShipped", AggregateType: "Order", AggregateID: "o-1", Version: 6, Index: 2,
		OwnerID: "b-1", Position: 99, Time: at, Payload: map[string]int{"n": 1},
	}

	before := time.Now()
	first := spec.WhenEvent(ev).ExpectNoError()
	spec.WhenEvent(ev).ExpectNoError()
	ev.Handler = "audit"
	spec.WhenEvent(ev).ExpectNoError()
	ev.Handler, ev.Attempt, ev.Version, ev.Index, ev.Payload = "", 7, 0, 0, nil
	spec.WhenEvent(ev).ExpectNoError()

	if len(got) != 4 {
		t.Fatalf("%d calls, want 4", len(got))
	}
	c := got[0]
	if c.InvocationKey != "ShipmentNotifier.onOrderShipped:Order/o-1@6:2" || first.Key != c.InvocationKey || first.Subscription != "ShipmentNotifier.onOrderShipped" {
		t.Errorf("key = %q, then = %q %q", c.InvocationKey, first.Key, first.Subscription)
	}
	if c.InvocationKey != berth.InvocationKey("ShipmentNotifier", "onOrderShipped", "Order", "o-1", 6, 2) {
		t.Errorf("key %q is not berth.InvocationKey's", c.InvocationKey)
	}
	e := c.Event
	if e.Type != "OrderShipped" || e.AggregateType != "Order" || e.AggregateID != "o-1" || e.Version != 6 || e.Index != 2 ||
		e.OwnerID != "b-1" || e.Position != 99 || !e.Time.Equal(at) || string(e.Payload) != `{"n":1}` {
		t.Errorf("event = %+v", e)
	}
	if c.Deadline.Before(before.Add(time.Hour)) || c.Deadline.After(time.Now().Add(time.Hour)) {
		t.Errorf("deadline = %v, want an hour from the call", c.Deadline)
	}
	if d := got[2].Deadline.Sub(before); d < time.Second || d > time.Minute {
		t.Errorf("the audit handler's own timeout is not its deadline: %v", d)
	}
	attempts := []int{got[0].Attempt, got[1].Attempt, got[2].Attempt, got[3].Attempt}
	if !slices.Equal(attempts, []int{1, 2, 1, 7}) {
		t.Errorf("attempts = %v, want [1 2 1 7]", attempts)
	}
	if got[2].InvocationKey != "ShipmentNotifier.audit:Order/o-1@6:2" {
		t.Errorf("audit key = %q", got[2].InvocationKey)
	}
	if got[3].InvocationKey != "ShipmentNotifier.onOrderShipped:Order/o-1@1:0" || got[3].Event.Payload != nil {
		t.Errorf("defaults: key %q, payload %q", got[3].InvocationKey, got[3].Event.Payload)
	}
}

func TestPayloadEncodings(t *testing.T) {
	tests := []struct {
		payload any
		want    string
	}{
		{nil, ""},
		{[]byte(`{"a":1}`), `{"a":1}`},
		{`{"a":1}`, `{"a":1}`},
		{struct {
			A int `json:"a"`
		}{1}, `{"a":1}`},
		{[]string{"x"}, `["x"]`},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			var got string
			p := &berth.Processor{Name: "P", Kind: berth.Reactor}
			p.On("h", "E", func(c *berth.Context) error { got = string(c.Event.Payload); return nil })
			berthtest.New(t, p).WhenEvent(berthtest.Event{Type: "E", Payload: tt.payload}).ExpectNoError()
			if got != tt.want {
				t.Errorf("payload = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestMistakesInTheTestAreFatal(t *testing.T) {
	tests := []struct {
		name string
		run  func(berthtest.TB)
		want string
	}{
		{"invalid processor", func(r berthtest.TB) { berthtest.New(r, &berth.Processor{Name: "P", Kind: berth.Reactor}) }, "the host would refuse processor P"},
		{"no handler for the type", func(r berthtest.TB) {
			berthtest.New(r, reactor()).WhenEvent(berthtest.Event{Type: "Nope"}).ExpectNoError()
		}, `processor R has no handler for "Nope" events`},
		{"no such handler", func(r berthtest.TB) {
			berthtest.New(r, reactor()).WhenEvent(berthtest.Event{Type: "Ok", Handler: "nope"}).ExpectError()
		}, `processor R has no handler "nope"`},
		{"handler of another type", func(r berthtest.TB) {
			berthtest.New(r, reactor()).WhenEvent(berthtest.Event{Type: "Ok", Handler: "plain"})
		}, `handler R.plain does not handle "Ok" events`},
		{"bad payload", func(r berthtest.TB) {
			berthtest.New(r, reactor()).WhenEvent(berthtest.Event{Type: "Ok", Payload: func() {}})
		}, "Ok payload: marshal func()"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &recorder{}
			tt.run(r)
			if len(r.fatals) != 1 || !strings.Contains(r.fatals[0], tt.want) || len(r.errors) > 0 {
				t.Errorf("fatals = %q, errors = %q, want one fatal containing %q", r.fatals, r.errors, tt.want)
			}
		})
	}
}

func TestLogLinesAreTaggedWithTheKey(t *testing.T) {
	p := &berth.Processor{Name: "P", Kind: berth.Reactor}
	p.On("h", "E", func(c *berth.Context) error {
		c.Log.Info("hello", "who", "world")
		c.Log.Error("oops")
		return nil
	})
	r := &recorder{}
	spec := berthtest.New(r, p)
	spec.WhenEvent(berthtest.Event{Type: "E", AggregateType: "T", AggregateID: "a", Version: 3}).ExpectNoError()
	lines := spec.Log.Lines()
	if len(lines) != 2 || lines[0].Key != "P.h:T/a@3:0" || lines[0].Level != "info" || lines[1].Level != "error" {
		t.Fatalf("lines = %+v", lines)
	}
	if want := "info P.h:T/a@3:0: hello who=world"; lines[0].String() != want || len(r.logs) != 2 || r.logs[0] != want {
		t.Errorf("line = %q, test log = %q, want %q", lines[0], r.logs, want)
	}
}
