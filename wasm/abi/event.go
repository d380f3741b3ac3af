package abi

// Event is the envelope the host hands to berth_handle: one event of one
// commit, addressed to one handler of the module.
type Event struct {
	// Handler names the handler to run (as in HandlerDesc.Name).
	Handler string
	// InvocationKey is `Processor.handler:aggregateType/aggregateId@version:index`
	// with the names escaped (InvocationKey); it is the same on every attempt
	// at this event and no other event's, so it serves as an idempotency key.
	InvocationKey string
	// Attempt counts the attempts at this event, from 1.
	Attempt uint32
	// Type is the event type, e.g. "OrderShipped".
	Type string
	// AggregateType and AggregateID name the aggregate the event belongs to.
	AggregateType string
	AggregateID   string
	// Version is the aggregate version of the commit holding the event (1, 2, …).
	Version uint64
	// Index is the position of the event within its commit, from 0.
	Index uint32
	// OwnerID is the owner of the aggregate (e.g. the buyer), possibly empty.
	OwnerID string
	// Position is the commit's global position in the event log.
	Position uint64
	// TimeUnixNano is when the commit was appended.
	TimeUnixNano int64
	// DeadlineUnixNano is when the attempt will be cancelled (0: none).
	DeadlineUnixNano int64
	// Payload is the event body, JSON by convention.
	Payload []byte
}

// AppendEvent appends the encoding of ev to buf.
func AppendEvent(buf []byte, ev *Event) []byte {
	e := Encoder{buf: buf}
	e.String(ev.Handler)
	e.String(ev.InvocationKey)
	e.Uint(uint64(ev.Attempt))
	e.String(ev.Type)
	e.String(ev.AggregateType)
	e.String(ev.AggregateID)
	e.Uint(ev.Version)
	e.Uint(uint64(ev.Index))
	e.String(ev.OwnerID)
	e.Uint(ev.Position)
	e.Int(ev.TimeUnixNano)
	e.Int(ev.DeadlineUnixNano)
	e.Blob(ev.Payload)
	return e.buf
}

// DecodeEvent decodes an Event; its Payload aliases b, its strings are
// copies.
func DecodeEvent(b []byte) (Event, error) {
	var ev Event
	err := decodeEvent(NewDecoder(b), &ev)
	return ev, err
}

// BorrowEvent decodes an Event into ev without copying anything: its
// strings and its Payload alias b, so b must never change while any of them
// is in use (ABI.md, Memory ownership). It allocates nothing. The guest SDK
// decodes each envelope this way, in memory it never hands out again.
func BorrowEvent(b []byte, ev *Event) error {
	return decodeEvent(&Decoder{buf: b, borrow: true}, ev)
}

func decodeEvent(d *Decoder, ev *Event) error {
	ev.Handler = d.String()
	ev.InvocationKey = d.String()
	ev.Attempt = d.Uint32()
	ev.Type = d.String()
	ev.AggregateType = d.String()
	ev.AggregateID = d.String()
	ev.Version = d.Uint()
	ev.Index = d.Uint32()
	ev.OwnerID = d.String()
	ev.Position = d.Uint()
	ev.TimeUnixNano = d.Int()
	ev.DeadlineUnixNano = d.Int()
	ev.Payload = d.Blob()
	return d.Done()
}
