package abi

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// ProcessorKind says what a processor is for; it sets the default start
// position and which ports the host offers.
type ProcessorKind uint8

const (
	KindReactor    ProcessorKind = 1 // reacts to events with side effects; starts at the end
	KindSaga       ProcessorKind = 2 // derives commands; starts at the end
	KindProjection ProcessorKind = 3 // maintains a read model; starts at the beginning
)

// String returns "reactor", "saga" or "projection".
func (k ProcessorKind) String() string {
	switch k {
	case KindReactor:
		return "reactor"
	case KindSaga:
		return "saga"
	case KindProjection:
		return "projection"
	default:
		return fmt.Sprintf("kind(%d)", uint8(k))
	}
}

// StartPosition says where a new subscription of the processor starts.
type StartPosition uint8

const (
	// StartDefault starts where the kind says: reactors and sagas at the end
	// of the log, projections at the beginning.
	StartDefault StartPosition = 0
	// StartBeginning replays the whole log.
	StartBeginning StartPosition = 1
	// StartEnd handles only events appended after the subscription starts.
	StartEnd StartPosition = 2
)

// String returns "default", "beginning" or "end".
func (s StartPosition) String() string {
	switch s {
	case StartDefault:
		return "default"
	case StartBeginning:
		return "beginning"
	case StartEnd:
		return "end"
	default:
		return fmt.Sprintf("start(%d)", uint8(s))
	}
}

// RetrySettings are the retry settings a module declares on its processor or
// on a handler. A zero field is inherited from the next layer out.
type RetrySettings struct {
	MaxAttempts    uint32        // the calls in all, at least 1
	InitialBackoff time.Duration // the wait after the first failure
	MaxBackoff     time.Duration // the longest wait between attempts
	Timeout        time.Duration // how long one attempt may run
	Unrecoverable  []string      // error classes that park at once
	Recoverable    []string      // error classes retried within the budget
}

// HandlerDesc describes one handler of the processor.
type HandlerDesc struct {
	// Name is the handler's name; the subscription is `Processor.Name`.
	Name string
	// EventTypes lists the event types the handler is registered for.
	EventTypes []string
	// Retry overrides the processor's settings, setting by setting.
	Retry RetrySettings
}

// ErrorClass is one node of the module's error class tree.
type ErrorClass struct {
	Name   string
	Parent string // empty for a class directly under the root
}

// Description is what berth_describe returns: the module's processor, its
// handlers and everything the host must know before delivering events.
type Description struct {
	ABIVersion uint32
	Processor  string
	Kind       ProcessorKind
	Start      StartPosition
	Retry      RetrySettings
	Handlers   []HandlerDesc
	Classes    []ErrorClass
}

func appendRetry(e *Encoder, r *RetrySettings) {
	e.Uint(uint64(r.MaxAttempts))
	e.Int(int64(r.InitialBackoff))
	e.Int(int64(r.MaxBackoff))
	e.Int(int64(r.Timeout))
	e.Strings(r.Unrecoverable)
	e.Strings(r.Recoverable)
}

func decodeRetry(d *Decoder) RetrySettings {
	return RetrySettings{
		MaxAttempts:    d.Uint32(),
		InitialBackoff: time.Duration(d.Int()),
		MaxBackoff:     time.Duration(d.Int()),
		Timeout:        time.Duration(d.Int()),
		Unrecoverable:  d.Strings(),
		Recoverable:    d.Strings(),
	}
}

// AppendDescription appends the encoding of desc to buf.
func AppendDescription(buf []byte, desc *Description) []byte {
	e := Encoder{buf: buf}
	e.Uint(uint64(desc.ABIVersion))
	e.String(desc.Processor)
	e.Uint(uint64(desc.Kind))
	e.Uint(uint64(desc.Start))
	appendRetry(&e, &desc.Retry)
	e.Uint(uint64(len(desc.Handlers)))
	for i := range desc.Handlers {
		h := &desc.Handlers[i]
		e.String(h.Name)
		e.Strings(h.EventTypes)
		appendRetry(&e, &h.Retry)
	}
	e.Uint(uint64(len(desc.Classes)))
	for _, c := range desc.Classes {
		e.String(c.Name)
		e.String(c.Parent)
	}
	return e.buf
}

// DecodeDescription decodes a Description without validating it.
func DecodeDescription(b []byte) (Description, error) {
	d := NewDecoder(b)
	var desc Description
	desc.ABIVersion = d.Uint32()
	if d.Err() == nil && desc.ABIVersion != Version {
		return desc, fmt.Errorf("abi: description is ABI version %d, host speaks %d", desc.ABIVersion, Version)
	}
	desc.Processor = d.String()
	desc.Kind = ProcessorKind(d.Byte())
	desc.Start = StartPosition(d.Byte())
	desc.Retry = decodeRetry(d)
	n := d.count()
	for i := 0; i < n && d.Err() == nil; i++ {
		desc.Handlers = append(desc.Handlers, HandlerDesc{Name: d.String(), EventTypes: d.Strings(), Retry: decodeRetry(d)})
	}
	n = d.count()
	for i := 0; i < n && d.Err() == nil; i++ {
		desc.Classes = append(desc.Classes, ErrorClass{Name: d.String(), Parent: d.String()})
	}
	return desc, d.Done()
}

// Validate checks what the host relies on: a processor name, a known kind
// and start position, at least one handler, unique handler names, each with
// an event type, sane retry settings, and an error class tree without
// duplicates, unknown parents or cycles. The error names the first problem.
func (desc *Description) Validate() error {
	if desc.Processor == "" {
		return errors.New("processor has no name")
	}
	if err := validName(desc.Processor); err != nil {
		return fmt.Errorf("processor name %q: %w", desc.Processor, err)
	}
	if desc.Kind < KindReactor || desc.Kind > KindProjection {
		return fmt.Errorf("processor %s: unknown kind %d", desc.Processor, desc.Kind)
	}
	if desc.Start > StartEnd {
		return fmt.Errorf("processor %s: unknown start position %d", desc.Processor, desc.Start)
	}
	if err := desc.Retry.validate(); err != nil {
		return fmt.Errorf("processor %s retry: %w", desc.Processor, err)
	}
	if len(desc.Handlers) == 0 {
		return fmt.Errorf("processor %s has no handlers", desc.Processor)
	}
	seen := map[string]bool{}
	for _, h := range desc.Handlers {
		if err := validName(h.Name); err != nil {
			return fmt.Errorf("handler name %q: %w", h.Name, err)
		}
		if seen[h.Name] {
			return fmt.Errorf("handler %s is declared twice", h.Name)
		}
		seen[h.Name] = true
		if len(h.EventTypes) == 0 {
			return fmt.Errorf("handler %s has no event type", h.Name)
		}
		if err := h.Retry.validate(); err != nil {
			return fmt.Errorf("handler %s retry: %w", h.Name, err)
		}
	}
	return validateClasses(desc.Classes)
}

// validateClasses checks the error class tree: every class has a name that
// is valid UTF-8 and declared once, every parent is declared, and no class
// is its own ancestor (a parent of itself included). The error names the
// class, and for a cycle the whole loop.
func validateClasses(classes []ErrorClass) error {
	parents := make(map[string]string, len(classes))
	for i, c := range classes {
		switch {
		case c.Name == "":
			return fmt.Errorf("error class %d has no name", i+1)
		case !utf8.ValidString(c.Name):
			return fmt.Errorf("error class %+q: name is not valid UTF-8", c.Name)
		case !utf8.ValidString(c.Parent):
			return fmt.Errorf("error class %s: parent %+q is not valid UTF-8", c.Name, c.Parent)
		}
		if _, dup := parents[c.Name]; dup {
			return fmt.Errorf("error class %s is declared twice", c.Name)
		}
		parents[c.Name] = c.Parent
	}
	for _, c := range classes {
		if c.Parent == c.Name {
			return fmt.Errorf("error class %s is its own parent", c.Name)
		}
		if c.Parent != "" {
			if _, ok := parents[c.Parent]; !ok {
				return fmt.Errorf("error class %s has unknown parent %s (declare %s as a class too)", c.Name, c.Parent, c.Parent)
			}
		}
		// Walk up to the root; a class met twice closes a loop.
		path := []string{c.Name}
		at := map[string]int{c.Name: 0}
		for p := c.Parent; p != ""; p = parents[p] {
			path = append(path, p)
			if i, again := at[p]; again {
				return fmt.Errorf("error class %s is its own ancestor (%s)", p, strings.Join(path[i:], " -> "))
			}
			at[p] = len(path) - 1
		}
	}
	return nil
}

func (r *RetrySettings) validate() error {
	switch {
	case r.InitialBackoff < 0:
		return fmt.Errorf("initial backoff %v is negative", r.InitialBackoff)
	case r.MaxBackoff < 0:
		return fmt.Errorf("max backoff %v is negative", r.MaxBackoff)
	case r.Timeout < 0:
		return fmt.Errorf("timeout %v is negative", r.Timeout)
	}
	return nil
}

// validName accepts names usable in subscription names and URLs: letters,
// digits, '_' and '-', not starting with a digit or '-'.
func validName(s string) error {
	if s == "" {
		return errors.New("empty")
	}
	for i, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_':
		case (c >= '0' && c <= '9') || c == '-':
			if i == 0 {
				return errors.New("must start with a letter or '_'")
			}
		default:
			return fmt.Errorf("character %q not allowed", c)
		}
	}
	return nil
}
