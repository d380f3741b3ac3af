package berth

import (
	"bytes"
	"encoding/json"

	"github.com/berthhq/berth/wasm/abi"
)

// EventCommandRejected is the reserved event type of a saga's rejection
// handler: the host delivers a command its gateway rejected (409 or 422)
// under this type, in the same attempt as the event whose handling sent it.
const EventCommandRejected = abi.EventCommandRejected

// Rejection is a command of the saga that the command gateway rejected, as
// its rejection handler gets it. A rejection is not a failure: the host
// never retries the command; the saga compensates, e.g. by sending another.
type Rejection struct {
	// Command is the command as the saga sent it.
	Command Command
	// Reason is why the gateway rejected it: the problem's detail, or the
	// answer's body (bounded).
	Reason string
	// Status is the gateway's HTTP status, 409 or 422.
	Status int
	// EventType is the type of the event whose handling sent the command;
	// c.Event holds that event's aggregate, version and position.
	EventType string
	// RequestID is the command's request id, "<invocation key>/<index>",
	// the same on every redelivery.
	RequestID string
}

// RejectionFunc handles a rejected command of a saga.
type RejectionFunc func(c *Context, r Rejection) error

// OnRejected registers fn as the saga's rejection handler, named name, for
// commands the gateway rejects, with optional handler-level retry settings
// (at most one Retry). The handler gets no subscription of its own: the
// host calls it in the attempt that sent the command, with the invocation
// key "<the event's key>:rejected:<command index>", and a failure of it is
// that attempt's failure (retried, then parked). Its own commands are sent
// like any other; a rejection of one of those is logged, not delivered
// again. A saga without a rejection handler has its rejections logged.
func (p *Processor) OnRejected(name string, fn RejectionFunc, retry ...Retry) *Processor {
	return p.On(name, EventCommandRejected, func(c *Context) error {
		r, err := DecodeRejection(c.Event.Payload)
		if err != nil {
			return err
		}
		return fn(c, r)
	}, retry...)
}

// DecodeRejection decodes the JSON payload of a berth.CommandRejected event
// (wasm/abi.Rejection). A payload that does not decode is a ClassHost error.
func DecodeRejection(payload []byte) (Rejection, error) {
	var r abi.Rejection
	if err := json.Unmarshal(payload, &r); err != nil {
		return Rejection{}, ClassHost.Errorf("decode %s payload: %w", EventCommandRejected, err)
	}
	cmd := Command{
		AggregateType: r.Command.AggregateType,
		AggregateID:   r.Command.AggregateID,
		Type:          r.Command.Type,
	}
	if p := bytes.TrimSpace(r.Command.Payload); len(p) > 0 && !bytes.Equal(p, []byte("null")) {
		cmd.Payload = []byte(p)
	}
	return Rejection{Command: cmd, Reason: r.Reason, Status: r.Status, EventType: r.EventType, RequestID: r.RequestID}, nil
}

// EncodeRejection returns the JSON payload the host delivers for r, the
// inverse of DecodeRejection. A Command.Payload that is not JSON is sent as
// a JSON string.
func EncodeRejection(r Rejection) []byte {
	payload := json.RawMessage(r.Command.Payload)
	switch {
	case len(bytes.TrimSpace(payload)) == 0:
		payload = json.RawMessage("null")
	case !json.Valid(payload):
		payload, _ = json.Marshal(string(r.Command.Payload))
	}
	b, _ := json.Marshal(abi.Rejection{
		Command: abi.RejectedCommand{
			AggregateType: r.Command.AggregateType,
			AggregateID:   r.Command.AggregateID,
			Type:          r.Command.Type,
			Payload:       payload,
		},
		Reason:    r.Reason,
		Status:    r.Status,
		EventType: r.EventType,
		RequestID: r.RequestID,
	})
	return b
}
