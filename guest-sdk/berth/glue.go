package berth

import (
	"unsafe"

	"github.com/berthhq/berth/wasm/abi"
)

// glue is the state behind the module's exports (wasm_wasip1.go), kept
// apart from them so that native tests can run and measure it. An event on
// the no-op path allocates nothing and leaves almost no garbage: every
// allocation in a Go guest is paid again by its collector, inside the call.
//
//   - The envelope buffer is reused for every event, and the event is
//     decoded in place: Payload is a view of it, valid until the handler
//     returns (the next event overwrites it).
//   - A handler may keep the event's strings, so they are moved, with one
//     copy of the envelope's head, into blocks that are never reused.
//   - The Context is the module's one, reset for each event.
type glue struct {
	in   []byte // the envelope buffer
	out  []byte // the last encoded result, until the host's next call
	strs blocks // where the strings of the events live
	ctx  Context
}

// alloc is berth_alloc: the buffer for the host to write an envelope of
// size bytes into.
func (g *glue) alloc(size uint32) []byte {
	if uint32(cap(g.in)) < max(size, 1) { // an empty envelope still needs an address
		g.in = make([]byte, size, max(size, 512))
	}
	g.in = g.in[:size]
	return g.in
}

// handle is berth_handle: decode the envelope in, run the handler it names
// with the module's Context, and encode the result.
func (g *glue) handle(p *Processor, in []byte, ports Ports) []byte {
	var ev abi.Event
	var res abi.Result
	switch err := abi.BorrowEvent(in, &ev); {
	case err != nil:
		res = failed(abi.Failure{Classes: ClassHost.Chain(), Message: "decode envelope: " + err.Error()})
	case p == nil:
		res = failed(abi.Failure{Classes: ClassHost.Chain(), Message: ErrNoProcessor.Error()})
	default:
		g.keepStrings(&ev, in)
		g.ctx.reset(&ev, ports)
		res = p.dispatch(&g.ctx, ev.Handler)
	}
	g.out = abi.AppendResult(g.out[:0], &res)
	return g.out
}

// keepStrings moves the strings a handler sees, views of the envelope in,
// to a copy of the envelope's head (all but the payload, which is last) in
// memory that is never written again. ev.Handler stays a view: only
// dispatch reads it.
func (g *glue) keepStrings(ev *abi.Event, in []byte) {
	head := in[:len(in)-len(ev.Payload)]
	kept := g.strs.take(len(head))
	copy(kept, head)
	for _, s := range [...]*string{&ev.InvocationKey, &ev.Type, &ev.AggregateType, &ev.AggregateID, &ev.OwnerID} {
		if *s != "" {
			off := uintptr(unsafe.Pointer(unsafe.StringData(*s))) - uintptr(unsafe.Pointer(unsafe.SliceData(in)))
			*s = unsafe.String(&kept[off], len(*s))
		}
	}
}

// blockSize is the size of the blocks strings are kept in; a request for
// more than a quarter of it gets memory of its own.
const blockSize = 16 << 10

// blocks hands out memory that is written once and never reused: slices
// of a block, carved in turn. The garbage collector frees a block once
// nothing refers into it.
type blocks struct{ block []byte }

func (b *blocks) take(n int) []byte {
	if n > blockSize/4 {
		return make([]byte, n)
	}
	if cap(b.block)-len(b.block) < n {
		b.block = make([]byte, 0, blockSize)
	}
	start := len(b.block)
	b.block = b.block[:start+n]
	return b.block[start : start+n : start+n]
}
