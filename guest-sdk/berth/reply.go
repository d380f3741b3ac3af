package berth

import (
	"time"

	"github.com/berthhq/berth/wasm/abi"
)

// ReplyError is the error a port returns for a host call's reply that is
// not a success, as the module's ports map it: refused is
// ClassConnectionRefused (systemic), denied ClassOutboundDenied, timeout and
// backpressure ClassWaitTimeout (backpressure, with the reply's
// retry-after), unsupported ClassUnsupported, anything else ClassHost. The
// message is what (the call, e.g. "POST http://…") and the reply's message.
// It is exported for test kits that answer a handler's calls with recorded
// replies (berthtest.Replay), so that the handler sees the errors it saw in
// the module.
func ReplyError(what string, r *abi.Reply) error {
	msg := what + ": " + r.Message
	switch r.Code {
	case abi.ReplyRefused:
		e := ClassConnectionRefused.New(msg)
		e.Kind = abi.KindSystemic
		return e
	case abi.ReplyDenied:
		return ClassOutboundDenied.New(msg)
	case abi.ReplyTimeout, abi.ReplyBackpressure:
		e := ClassWaitTimeout.New(msg)
		e.Kind = abi.KindBackpressure
		e.RetryAfter = time.Duration(r.RetryAfterMillis) * time.Millisecond
		return e
	case abi.ReplyUnsupported:
		return ClassUnsupported.New(msg)
	default:
		return ClassHost.New(msg)
	}
}
