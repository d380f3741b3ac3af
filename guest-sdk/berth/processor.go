// Package berth is what a handler author imports to write a Berth event
// handler in Go: a processor (reactor, saga or projection) with handlers
// registered per event type, their retry budgets, error classes, and the
// context and ports a handler uses. Build the module with the standard Go
// toolchain:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o handler.wasm .
//
// The same code runs natively under `go test`, with fake ports, for unit
// tests.
package berth

import (
	"errors"
	"fmt"

	"github.com/berthhq/berth/wasm/abi"
)

// Kind is what a processor is.
type Kind = abi.ProcessorKind

// The three kinds of processor.
const (
	Reactor    = abi.KindReactor    // side effects; starts at the end of the log
	Saga       = abi.KindSaga       // derives commands; starts at the end
	Projection = abi.KindProjection // maintains a read model; starts at the beginning
)

// Start is where a new subscription of the processor starts.
type Start = abi.StartPosition

// Start positions; StartDefault follows the kind.
const (
	StartDefault   = abi.StartDefault
	StartBeginning = abi.StartBeginning
	StartEnd       = abi.StartEnd
)

// HandlerFunc handles one event. A nil error is success; any other error is
// a failure the host classifies and retries or parks.
type HandlerFunc func(c *Context) error

// Handler is one registered handler.
type Handler struct {
	Name       string      // the handler's name; the subscription is "Processor.Name"
	EventTypes []string    // the event types it handles
	Retry      Retry       // overrides the processor's Retry, setting by setting
	Func       HandlerFunc // the code
}

// Processor is a named set of handlers of one kind with a shared retry
// budget. Build one, register its handlers with On, and pass it to Register
// from an init function of the module's main package.
type Processor struct {
	Name   string
	Kind   Kind
	Start  Start         // zero: by kind
	Retry  Retry         // the processor's budget; zero fields inherit the host's
	Errors []*ErrorClass // extra classes to declare (those in Retry lists are declared anyway)

	handlers []*Handler
}

// On registers fn as the handler named name for the event type, with
// optional handler-level retry settings (at most one Retry).
func (p *Processor) On(name, eventType string, fn HandlerFunc, retry ...Retry) *Processor {
	h := &Handler{Name: name, EventTypes: []string{eventType}, Func: fn}
	if len(retry) > 0 {
		h.Retry = retry[0]
	}
	p.handlers = append(p.handlers, h)
	return p
}

// Handlers returns the registered handlers.
func (p *Processor) Handlers() []*Handler { return p.handlers }

// Handler returns the handler with the name, or nil.
func (p *Processor) Handler(name string) *Handler {
	for _, h := range p.handlers {
		if h.Name == name {
			return h
		}
	}
	return nil
}

// HandlerFor returns the first handler registered for the event type, or nil.
func (p *Processor) HandlerFor(eventType string) *Handler {
	for _, h := range p.handlers {
		for _, t := range h.EventTypes {
			if t == eventType {
				return h
			}
		}
	}
	return nil
}

// Describe returns the description the host reads at load: the processor,
// its handlers, their retry settings and the error class tree.
func (p *Processor) Describe() abi.Description {
	d := abi.Description{
		ABIVersion: abi.Version,
		Processor:  p.Name,
		Kind:       p.Kind,
		Start:      p.Start,
		Retry:      p.Retry.settings(),
	}
	classes := newClassSet()
	classes.add(p.Errors...)
	classes.add(p.Retry.Unrecoverable...)
	classes.add(p.Retry.Recoverable...)
	for _, h := range p.handlers {
		d.Handlers = append(d.Handlers, abi.HandlerDesc{Name: h.Name, EventTypes: h.EventTypes, Retry: h.Retry.settings()})
		classes.add(h.Retry.Unrecoverable...)
		classes.add(h.Retry.Recoverable...)
	}
	d.Classes = classes.list
	return d
}

// Validate checks the processor as the host will: the error names the problem.
func (p *Processor) Validate() error {
	for _, h := range p.handlers {
		if h.Func == nil {
			return fmt.Errorf("berth: handler %s has no function", h.Name)
		}
	}
	d := p.Describe()
	if err := d.Validate(); err != nil {
		return fmt.Errorf("berth: %w", err)
	}
	return nil
}

// classSet collects classes with their ancestors, parents first.
type classSet struct {
	seen map[string]bool
	list []abi.ErrorClass
}

func newClassSet() *classSet { return &classSet{seen: map[string]bool{}} }

func (s *classSet) add(cs ...*ErrorClass) {
	for _, c := range cs {
		if c == nil || s.seen[c.name] {
			continue
		}
		s.add(c.parent)
		s.seen[c.name] = true
		parent := ""
		if c.parent != nil {
			parent = c.parent.name
		}
		s.list = append(s.list, abi.ErrorClass{Name: c.name, Parent: parent})
	}
}

// ErrNoProcessor is reported when a module calls no Register.
var ErrNoProcessor = errors.New("berth: no processor registered (call berth.Register from an init function)")
