package sandbox

import (
	"context"
	"errors"

	"github.com/berthhq/berth/wasm/abi"
)

// KV is the host side of a projection's key/value port for one call. The
// caller decides what a write means: the registry buffers writes and
// commits them with the event's checkpoint only if the call succeeds.
type KV interface {
	Get(key string) (value []byte, ok bool, err error)
	Put(key string, value []byte) error
	Delete(key string) error
}

// ErrBusy is what a KV returns to refuse a call as backpressure (a full
// bulkhead); the guest sees a backpressure reply.
var ErrBusy = errors.New("busy")

// Ports are the host-side ports of one call. A nil port answers
// Unsupported to the guest.
type Ports struct {
	KV KV
}

// maxKeyLen bounds a key/value key.
const maxKeyLen = 1024

func kvError(err error) abi.Reply {
	if errors.Is(err, ErrBusy) {
		return abi.Reply{Code: abi.ReplyBackpressure, Message: err.Error()}
	}
	return abi.Reply{Code: abi.ReplyError, Message: err.Error()}
}

func checkKey(key string) *abi.Reply {
	if key == "" || len(key) > maxKeyLen {
		return &abi.Reply{Code: abi.ReplyError, Message: "a key must be 1 to 1024 bytes"}
	}
	return nil
}

func hostKVGet(_ context.Context, cs *callState, req []byte) abi.Reply {
	if cs.ports.KV == nil {
		return unsupportedKV(cs)
	}
	key := string(req)
	if r := checkKey(key); r != nil {
		return *r
	}
	v, ok, err := cs.ports.KV.Get(key)
	switch {
	case err != nil:
		return kvError(err)
	case !ok:
		return abi.Reply{Code: abi.ReplyNotFound, Message: "no value for " + key}
	}
	return abi.Reply{Code: abi.ReplyOK, Body: v}
}

func hostKVPut(_ context.Context, cs *callState, req []byte) abi.Reply {
	if cs.ports.KV == nil {
		return unsupportedKV(cs)
	}
	p, err := abi.DecodeKVPut(req)
	if err != nil {
		return abi.Reply{Code: abi.ReplyError, Message: err.Error()}
	}
	if r := checkKey(p.Key); r != nil {
		return *r
	}
	if err := cs.ports.KV.Put(p.Key, append([]byte(nil), p.Value...)); err != nil {
		return kvError(err)
	}
	return abi.Reply{Code: abi.ReplyOK}
}

func hostKVDelete(_ context.Context, cs *callState, req []byte) abi.Reply {
	if cs.ports.KV == nil {
		return unsupportedKV(cs)
	}
	key := string(req)
	if r := checkKey(key); r != nil {
		return *r
	}
	if err := cs.ports.KV.Delete(key); err != nil {
		return kvError(err)
	}
	return abi.Reply{Code: abi.ReplyOK}
}

func unsupportedKV(cs *callState) abi.Reply {
	if cs.mod.desc.Kind != abi.KindProjection {
		return abi.Reply{Code: abi.ReplyUnsupported, Message: "only a projection has a key/value store; this processor is a " + cs.mod.desc.Kind.String()}
	}
	return abi.Reply{Code: abi.ReplyUnsupported, Message: "this call has no key/value store"}
}
