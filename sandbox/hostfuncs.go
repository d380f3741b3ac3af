package sandbox

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/berthhq/berth/wasm/abi"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

var (
	i32 = api.ValueTypeI32
	i64 = api.ValueTypeI64
)

// instantiateHost provides the "berth" host module (ABI.md, Host functions).
// Host functions never trust guest pointers: a range outside the guest's
// memory ends the call with errBadPointer, never a host panic.
func (s *Sandbox) instantiateHost(ctx context.Context, r wazero.Runtime) error {
	b := r.NewHostModuleBuilder(abi.HostModule)
	export := func(name string, fn api.GoModuleFunc, params, results []api.ValueType) {
		b.NewFunctionBuilder().WithGoModuleFunction(fn, params, results).WithName(name).Export(name)
	}
	export(abi.ImportLog, s.hostLog, []api.ValueType{i32, i32, i32}, nil)
	export(abi.ImportTakeReply, hostTakeReply, []api.ValueType{i32, i32}, []api.ValueType{i32})
	request := func(name, fn string, op func(context.Context, *callState, []byte) abi.Reply) {
		export(name, func(ctx context.Context, mod api.Module, stack []uint64) {
			stack[0] = uint64(hostRequest(ctx, mod, uint32(stack[0]), uint32(stack[1]), fn, op))
		}, []api.ValueType{i32, i32}, []api.ValueType{i64})
	}
	request(abi.ImportHTTP, abi.CallHTTP, s.hostHTTP)
	request(abi.ImportKVGet, abi.CallKVGet, hostKVGet)
	request(abi.ImportKVPut, abi.CallKVPut, hostKVPut)
	request(abi.ImportKVDelete, abi.CallKVDelete, hostKVDelete)
	request(abi.ImportCommand, abi.CallCommand, hostCommand)
	request(abi.ImportConfig, abi.CallConfig, hostConfig)
	if _, err := b.Instantiate(ctx); err != nil {
		return fmt.Errorf("sandbox: instantiate host module: %w", err)
	}
	return nil
}

// guestBytes returns the guest's memory at [ptr, ptr+n) or ends the call.
func guestBytes(mod api.Module, ptr, n uint32) []byte {
	b, ok := mod.Memory().Read(ptr, n)
	if !ok {
		panic(errBadPointer)
	}
	return b
}

// hostRequest runs one request/reply host call of capsule name fn: read
// the request, run op (in a replay, answer from the capsule instead), record
// the call, keep the encoded reply for take_reply and return its length.
func hostRequest(ctx context.Context, mod api.Module, ptr, n uint32, fn string, op func(context.Context, *callState, []byte) abi.Reply) int64 {
	req := guestBytes(mod, ptr, n)
	cs := callFrom(ctx)
	if cs == nil || cs.ev == nil {
		// Called from _initialize: there is no event, so no port to use.
		return abi.ErrBadRequest
	}
	cs.checkExpired()
	var reply abi.Reply
	var deadline bool
	if cs.replay != nil {
		// The recorded call may have run into the deadline: so does the replay.
		reply, deadline = cs.replay.answer(cs, fn, req)
		deadline = deadline || cs.pastDeadline()
	} else {
		reply = op(ctx, cs, req)
		deadline = cs.pastDeadline()
	}
	cs.reply = abi.AppendReply(cs.reply[:0], &reply)
	cs.rec.call(fn, req, cs.reply, deadline)
	if deadline {
		// A host call the deadline cut short ends the call (and is
		// recorded as the one it ended in).
		cs.expire()
		panic(errDeadline)
	}
	cs.pending = true
	return int64(len(cs.reply))
}

func hostTakeReply(ctx context.Context, mod api.Module, stack []uint64) {
	ptr, n := uint32(stack[0]), uint32(stack[1])
	cs := callFrom(ctx)
	if cs == nil || !cs.pending {
		stack[0] = api.EncodeI32(abi.ErrNoReply)
		return
	}
	k := min(n, uint32(len(cs.reply)))
	if !mod.Memory().Write(ptr, cs.reply[:k]) {
		panic(errBadPointer)
	}
	cs.pending = false // taken: a second take_reply answers ErrNoReply
	stack[0] = uint64(k)
}

func (s *Sandbox) hostLog(ctx context.Context, mod api.Module, stack []uint64) {
	level, ptr, n := uint32(stack[0]), uint32(stack[1]), uint32(stack[2])
	msg := guestBytes(mod, ptr, n)
	if len(msg) > s.cfg.MaxOutputBytes {
		msg = msg[:s.cfg.MaxOutputBytes]
	}
	lvl := slog.LevelInfo
	switch level {
	case abi.LogDebug:
		lvl = slog.LevelDebug
	case abi.LogWarn:
		lvl = slog.LevelWarn
	case abi.LogError:
		lvl = slog.LevelError
	}
	text, fields := abi.DecodeLogLine(msg)
	attrs := []any{}
	if cs := callFrom(ctx); cs != nil {
		cs.rec.log(level, msg)
		attrs = append(attrs, "module", cs.mod.name)
		if cs.ev != nil {
			attrs = append(attrs, "handler", cs.ev.Handler, "key", cs.ev.InvocationKey)
		}
		// The caller's context, not the call's: a handler may keep it.
		ctx = cs.ctx
		if ctx == nil {
			ctx = context.Background()
		}
	}
	if len(fields) > 0 {
		// The guest's own fields, apart from the host's attribution.
		attrs = append(attrs, slog.Group("fields", fields...))
	}
	s.cfg.Logger.Log(ctx, lvl, text, attrs...)
}

// hostCommand queues a saga's command; the caller sends the commands only
// after the handler succeeded, so a failed attempt sends nothing.
func hostCommand(_ context.Context, cs *callState, req []byte) abi.Reply {
	if cs.mod.desc.Kind != abi.KindSaga {
		return abi.Reply{Code: abi.ReplyUnsupported, Message: "only a saga sends commands; this processor is a " + cs.mod.desc.Kind.String()}
	}
	cmd, err := abi.DecodeCommand(req)
	if err != nil {
		return abi.Reply{Code: abi.ReplyError, Message: err.Error()}
	}
	cmd.Payload = append([]byte(nil), cmd.Payload...)
	cs.commands = append(cs.commands, cmd)
	return abi.Reply{Code: abi.ReplyOK}
}

func hostConfig(_ context.Context, cs *callState, req []byte) abi.Reply {
	v, ok := cs.mod.cfg.Config[string(req)]
	if !ok {
		return abi.Reply{Code: abi.ReplyNotFound, Message: fmt.Sprintf("no config value %q", req)}
	}
	return abi.Reply{Code: abi.ReplyOK, Body: []byte(v)}
}
