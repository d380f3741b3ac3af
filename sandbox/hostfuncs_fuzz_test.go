package sandbox

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/berthhq/berth/wasm/abi"
)

// FuzzHostCalls hands the host functions arbitrary pointers, lengths and
// request bytes from a real guest instance: a range outside guest memory
// must end the call with errBadPointer, anything else must be answered, and
// nothing may panic the host otherwise.
func FuzzHostCalls(f *testing.F) {
	s := newSandbox(f, Config{})
	m := load(f, s, "samples/misbehaving", ModuleConfig{Config: map[string]string{"k": "v"}})
	inst, err := m.newInstance(context.Background(), time.Time{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(inst.close)
	memSize := inst.memoryBytes()

	f.Add(uint8(0), uint32(1024), uint32(16), []byte("k"))
	f.Add(uint8(1), memSize-4, uint32(8), abi.AppendHTTPRequest(nil, &abi.HTTPRequest{Method: "GET", URL: "http://example.invalid/"}))
	f.Add(uint8(2), uint32(0xffffffff), uint32(0xffffffff), []byte{})
	f.Add(uint8(3), uint32(64), uint32(0), abi.AppendCommand(nil, &abi.Command{AggregateType: "A", AggregateID: "1", Type: "C"}))
	f.Add(uint8(4), uint32(4096), uint32(1<<20), []byte{0xff, 0xff})
	f.Fuzz(func(t *testing.T, op uint8, ptr, n uint32, req []byte) {
		ctx := inst.begin(context.Background(), &abi.Event{Handler: "echo", InvocationKey: "fuzz"}, Ports{}, time.Time{})
		defer inst.end()
		defer inst.finish()
		mod := inst.mod
		// Put the request bytes into guest memory at a valid spot, so that
		// both valid and invalid ranges are exercised.
		const scratch = 1 << 16
		mod.Memory().Write(scratch, req)
		defer func() {
			if r := recover(); r != nil {
				if err, ok := r.(error); !ok || !errors.Is(err, errBadPointer) {
					t.Fatalf("host panicked with %v", r)
				}
			}
		}()
		ops := []func(context.Context, *callState, []byte) abi.Reply{s.hostHTTP, hostCommand, hostConfig, hostKVGet, hostKVPut, hostKVDelete}
		names := []string{abi.CallHTTP, abi.CallCommand, abi.CallConfig, abi.CallKVGet, abi.CallKVPut, abi.CallKVDelete}
		fn, name := ops[int(op)%len(ops)], names[int(op)%len(ops)]
		if op&0x80 != 0 {
			ptr, n = scratch, uint32(len(req))
		}
		got := hostRequest(ctx, mod, ptr, n, name, fn)
		if got < 0 && got != abi.ErrBadRequest {
			t.Fatalf("host call returned %d", got)
		}
		stack := []uint64{uint64(ptr), uint64(n)}
		hostTakeReply(ctx, mod, stack)
	})
}

// TestTakeReplyOnce: a reply is taken once; a second take_reply, or one
// with nothing pending, answers ErrNoReply.
func TestTakeReplyOnce(t *testing.T) {
	s := newSandbox(t, Config{})
	m := load(t, s, "samples/misbehaving", ModuleConfig{Config: map[string]string{"k": "value"}})
	inst, err := m.newInstance(context.Background(), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	defer inst.close()
	ctx := inst.begin(context.Background(), &abi.Event{Handler: "echo", InvocationKey: "k"}, Ports{}, time.Time{})
	defer inst.end()
	defer inst.finish()
	const at = 1 << 16
	inst.mod.Memory().Write(at, []byte("k"))
	n := hostRequest(ctx, inst.mod, at, 1, abi.CallConfig, hostConfig)
	if n <= 0 {
		t.Fatalf("config_get answered %d", n)
	}
	stack := []uint64{at, uint64(n)}
	hostTakeReply(ctx, inst.mod, stack)
	if int32(stack[0]) != int32(n) {
		t.Fatalf("take_reply copied %d of %d bytes", int32(stack[0]), n)
	}
	b, _ := inst.mod.Memory().Read(at, uint32(n))
	if r, err := abi.DecodeReply(b); err != nil || r.Code != abi.ReplyOK || string(r.Body) != "value" {
		t.Fatalf("reply %+v, %v", r, err)
	}
	stack = []uint64{at, uint64(n)}
	hostTakeReply(ctx, inst.mod, stack)
	if int32(stack[0]) != abi.ErrNoReply {
		t.Errorf("second take_reply answered %d, want ErrNoReply", int32(stack[0]))
	}
}
