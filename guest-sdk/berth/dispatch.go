package berth

import (
	"fmt"
	"runtime/debug"
	"time"

	"github.com/berthhq/berth/wasm/abi"
)

// Ports are the implementations a Context is given. The WebAssembly build
// fills them with host-backed ports; a native test fills them with fakes.
type Ports struct {
	Log      Logger
	HTTP     HTTPClient
	KV       KV
	Commands CommandSender
	Config   Config
}

// NewContext builds the handler context for an envelope.
func NewContext(ev *abi.Event, ports Ports) *Context {
	c := new(Context)
	c.reset(ev, ports)
	return c
}

// reset makes c the context of the envelope ev.
func (c *Context) reset(ev *abi.Event, ports Ports) {
	*c = Context{
		Event: Event{
			Type:          ev.Type,
			AggregateType: ev.AggregateType,
			AggregateID:   ev.AggregateID,
			Version:       ev.Version,
			Index:         int(ev.Index),
			OwnerID:       ev.OwnerID,
			Position:      ev.Position,
			Payload:       ev.Payload,
		},
		InvocationKey: ev.InvocationKey,
		Attempt:       int(ev.Attempt),
		Log:           ports.Log,
		HTTP:          ports.HTTP,
		KV:            ports.KV,
		Commands:      ports.Commands,
		Config:        ports.Config,
	}
	if ev.TimeUnixNano != 0 {
		c.Event.Time = time.Unix(0, ev.TimeUnixNano)
	}
	if ev.DeadlineUnixNano != 0 {
		c.Deadline = time.Unix(0, ev.DeadlineUnixNano)
	}
}

// Dispatch runs the handler the envelope names and returns the result the
// host reads. A panic in the handler is recovered and reported as a failure
// of ClassPanic with its message and stack; an unknown handler is a failure
// of ClassHost.
func (p *Processor) Dispatch(ev *abi.Event, ports Ports) abi.Result {
	return p.dispatch(NewContext(ev, ports), ev.Handler)
}

// dispatch runs the handler named handler with the context c.
func (p *Processor) dispatch(c *Context, handler string) (res abi.Result) {
	h := p.Handler(handler)
	if h == nil {
		return failed(abi.Failure{Classes: ClassHost.Chain(), Message: fmt.Sprintf("processor %s has no handler %q", p.Name, handler)})
	}
	defer func() {
		if r := recover(); r != nil {
			res = failed(abi.Failure{Classes: ClassPanic.Chain(), Message: fmt.Sprintf("panic: %v\n\n%s", r, debug.Stack())})
		}
	}()
	if err := h.Func(c); err != nil {
		return failed(failureOf(err))
	}
	return abi.Result{Status: abi.StatusOK}
}

func failed(f abi.Failure) abi.Result { return abi.Result{Status: abi.StatusFailed, Failure: f} }
