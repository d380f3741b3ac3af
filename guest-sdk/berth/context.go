package berth

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/berthhq/berth/wasm/abi"
)

// Event is the event a handler is called for.
type Event struct {
	Type          string    // e.g. "OrderShipped"
	AggregateType string    // e.g. "Order"
	AggregateID   string    // the aggregate's id
	Version       uint64    // the aggregate version of the commit holding the event
	Index         int       // the event's index within its commit, from 0
	OwnerID       string    // the aggregate's owner, possibly empty
	Position      uint64    // the commit's global position
	Time          time.Time // when the commit was appended
	Payload       []byte    // the event body (JSON), valid until the handler returns
}

// Decode unmarshals the JSON payload into v.
func (e *Event) Decode(v any) error {
	if err := json.Unmarshal(e.Payload, v); err != nil {
		return fmt.Errorf("decode %s payload: %w", e.Type, err)
	}
	return nil
}

// Context is what a handler gets: the event, the invocation key and the ports.
//
// In a module the Context and the envelope's memory are reused for the next
// event, so past the handler's return neither c nor c.Event.Payload may be
// kept (copy the payload with bytes.Clone); the strings may (README, "What a
// handler may keep").
type Context struct {
	Event Event
	// InvocationKey is "Processor.handler:aggregateType/aggregateId@version:index"
	// with the names escaped (see InvocationKey): the same on every attempt
	// at this event and no other event's, so use it as an idempotency key.
	InvocationKey string
	// Attempt counts attempts at this event, from 1.
	Attempt int
	// Deadline is when the host cancels this attempt (zero: none known).
	Deadline time.Time

	Log      Logger        // structured log lines, tagged by the host with module and key
	HTTP     HTTPClient    // outbound HTTP, to the hosts the module may reach
	KV       KV            // a projection's read model
	Commands CommandSender // a saga's commands, sent after the handler succeeds
	Config   Config        // values the operator configured for the module
}

// InvocationKey builds the key the host hands to a handler, so that tests can
// build the same one: "Processor.handler:aggregateType/aggregateId@version:index",
// where '%', ':', '@', '/' and every byte outside printable ASCII in the
// names are written %XX (upper-case hex), so that no two events share a key
// whatever their ids hold (abi.InvocationKey; abi.ParseInvocationKey takes
// a key apart). E.g. ("ShipmentNotifier", "onOrderShipped", "Order", "o-1",
// 3, 0) is "ShipmentNotifier.onOrderShipped:Order/o-1@3:0".
func InvocationKey(processor, handler, aggregateType, aggregateID string, version uint64, index int) string {
	return abi.InvocationKey(processor+"."+handler, aggregateType, aggregateID, version, index)
}

// Logger writes structured log lines; kv are alternating keys and values.
type Logger interface {
	Debug(msg string, kv ...any)
	Info(msg string, kv ...any)
	Warn(msg string, kv ...any)
	Error(msg string, kv ...any)
}

// Request is an outbound HTTP request.
type Request struct {
	Method string
	URL    string
	Header map[string]string
	Body   []byte
}

// Response is an HTTP response.
type Response struct {
	Status int
	Header map[string]string // canonical header names, e.g. "Retry-After"
	Body   []byte
}

// HTTPClient sends outbound HTTP requests. Errors are *Error values of the
// classes ClassConnectionRefused (systemic), ClassOutboundDenied,
// ClassWaitTimeout (backpressure) or ClassHost.
type HTTPClient interface {
	Do(req *Request) (*Response, error)
}

// KV is a projection's key/value read model.
type KV interface {
	Get(key string) (value []byte, ok bool, err error)
	Put(key string, value []byte) error
	Delete(key string) error
}

// Command is a command a saga derives.
type Command struct {
	AggregateType string
	AggregateID   string
	Type          string
	Payload       []byte
}

// CommandSender queues commands; the host sends them only if the handler
// returns successfully.
type CommandSender interface {
	Send(cmd Command) error
}

// Config reads the values the operator configured for the module
// ([modules.<name>.config] in the host's TOML).
type Config interface {
	Get(key string) (value string, ok bool)
}
