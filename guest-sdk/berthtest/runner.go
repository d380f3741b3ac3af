package berthtest

import (
	"time"

	"github.com/berthhq/berth/guest-sdk/berth"
	"github.com/berthhq/berth/wasm/abi"
)

// Runner runs one call of a handler somewhere other than in the test's own
// process, e.g. the compiled module in the host's sandbox
// (github.com/berthhq/berth/hostspec). A Spec made with NewWithRunner hands
// it every call: the event's, and a saga rejection handler's.
//
// Run gets the envelope the Spec built (ev.Handler names the handler) and
// the delivery's ports, which are the Spec's fakes with the host's semantics
// around them: HTTP goes to Spec.HTTP at once and is recorded for the Then,
// KV writes are buffered and applied to Spec.KV only if the call succeeds,
// commands given to Commands.Send are sent to Spec.Commands (rejections and
// all) only if the call succeeds, Log lines are recorded in Spec.Log with
// the invocation key, and Config reads Spec.Config. Run returns the result
// the host reads. It must be safe to call again while a previous Run's
// result is being processed (a rejection handler runs after the event's
// handler returned).
type Runner interface {
	Run(ev *abi.Event, ports berth.Ports) abi.Result
}

// RunnerFunc adapts a function to Runner.
type RunnerFunc func(ev *abi.Event, ports berth.Ports) abi.Result

// Run calls f.
func (f RunnerFunc) Run(ev *abi.Event, ports berth.Ports) abi.Result { return f(ev, ports) }

// NewWithRunner returns a Spec for the processor desc describes whose calls
// r runs, with empty fakes; the author-facing API is that of New. The Spec's
// Processor mirrors desc (name, kind, handlers and their event types, retry
// settings) to pick handlers and deadlines; its handler functions are never
// called. It fails the test at once if the host would refuse desc.
//
// Then.Err of a failed call is the failure rebuilt as a *berth.Error (class
// chain by name, kind, code, retry-after and message), so ExpectErrorIs
// matches error classes, but not error values of the handler's own: those
// do not cross a Runner.
func NewWithRunner(t TB, desc abi.Description, r Runner) *Spec {
	t.Helper()
	if r == nil {
		t.Fatalf("berthtest: NewWithRunner with a nil runner")
	}
	if err := desc.Validate(); err != nil {
		t.Fatalf("berthtest: the host would refuse processor %s: %v", desc.Processor, err)
	}
	s := New(t, mirror(desc))
	s.runner = r
	return s
}

// errRunsElsewhere is what a mirrored processor's handlers return; a Spec
// with a Runner never calls them.
var errRunsElsewhere = berth.ClassHost.New("berthtest: this handler runs through the Spec's Runner")

// mirror builds a processor with desc's name, kind, handlers and retry
// settings, whose handler functions only fail.
func mirror(desc abi.Description) *berth.Processor {
	classes := map[string]*berth.ErrorClass{}
	var class func(name string) *berth.ErrorClass
	parents := map[string]string{}
	for _, c := range desc.Classes {
		parents[c.Name] = c.Parent
	}
	class = func(name string) *berth.ErrorClass {
		if c, ok := classes[name]; ok {
			return c
		}
		var parent *berth.ErrorClass
		if p := parents[name]; p != "" && p != name {
			classes[name] = nil // a cycle ends here; desc.Validate refuses one anyway
			parent = class(p)
		}
		c := berth.NewErrorClass(name, parent)
		classes[name] = c
		return c
	}
	list := func(names []string) []*berth.ErrorClass {
		var out []*berth.ErrorClass
		for _, n := range names {
			out = append(out, class(n))
		}
		return out
	}
	retry := func(r abi.RetrySettings) berth.Retry {
		return berth.Retry{
			MaxAttempts:    int(r.MaxAttempts),
			InitialBackoff: r.InitialBackoff,
			MaxBackoff:     r.MaxBackoff,
			Timeout:        r.Timeout,
			Unrecoverable:  list(r.Unrecoverable),
			Recoverable:    list(r.Recoverable),
		}
	}
	p := &berth.Processor{Name: desc.Processor, Kind: desc.Kind, Start: desc.Start, Retry: retry(desc.Retry)}
	for _, c := range desc.Classes {
		p.Errors = append(p.Errors, class(c.Name))
	}
	for _, h := range desc.Handlers {
		if len(h.EventTypes) == 0 {
			continue
		}
		p.On(h.Name, h.EventTypes[0], func(*berth.Context) error { return errRunsElsewhere }, retry(h.Retry))
		p.Handler(h.Name).EventTypes = append([]string(nil), h.EventTypes...)
	}
	return p
}

// run hands one call to the Spec's runner; the error is the failure rebuilt
// (nil on success).
func (s *Spec) run(env *abi.Event, d *delivery) (abi.Result, error) {
	res := s.runner.Run(env, d.ports())
	if res.Status != abi.StatusFailed {
		return res, nil
	}
	return res, errorOf(res.Failure)
}

// errorOf rebuilds the error a failure reports: its class chain (by name, so
// errors.Is matches the handler's own classes), kind, code and retry-after.
func errorOf(f abi.Failure) error {
	var class *berth.ErrorClass
	for i := len(f.Classes) - 1; i >= 0; i-- {
		class = berth.NewErrorClass(f.Classes[i], class)
	}
	return &berth.Error{
		Class:      class,
		Message:    f.Message,
		Code:       f.Code,
		Kind:       f.Kind,
		RetryAfter: time.Duration(f.RetryAfterMillis) * time.Millisecond,
	}
}
