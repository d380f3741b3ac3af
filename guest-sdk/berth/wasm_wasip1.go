//go:build wasip1

package berth

import (
	"fmt"
	"unsafe"

	"github.com/berthhq/berth/wasm/abi"
)

// This file is the guest half of ABI v1 (wasm/abi/ABI.md): the exports the
// host calls and the host functions the ports call.

//go:wasmimport berth log
func hostLog(level uint32, ptr unsafe.Pointer, n uint32)

//go:wasmimport berth http_request
func hostHTTP(ptr unsafe.Pointer, n uint32) int64

//go:wasmimport berth kv_get
func hostKVGet(ptr unsafe.Pointer, n uint32) int64

//go:wasmimport berth kv_put
func hostKVPut(ptr unsafe.Pointer, n uint32) int64

//go:wasmimport berth kv_delete
func hostKVDelete(ptr unsafe.Pointer, n uint32) int64

//go:wasmimport berth send_command
func hostCommand(ptr unsafe.Pointer, n uint32) int64

//go:wasmimport berth config_get
func hostConfig(ptr unsafe.Pointer, n uint32) int64

//go:wasmimport berth take_reply
func hostTakeReply(ptr unsafe.Pointer, n uint32) int32

// The state behind the exports. It is package-level because the exports are
// plain functions, and so that the garbage collector keeps what the host
// reads or writes alive between the calls that share it: an envelope from
// berth_alloc to berth_handle, a result or description until the next
// export call.
var (
	exports glue
	descBuf []byte
)

//go:wasmexport berth_abi_version
func exportABIVersion() uint32 { return abi.Version }

//go:wasmexport berth_alloc
func exportAlloc(size uint32) unsafe.Pointer {
	b := exports.alloc(size)
	return unsafe.Pointer(unsafe.SliceData(b[:cap(b)]))
}

//go:wasmexport berth_describe
func exportDescribe() uint64 {
	p := registered
	if p == nil {
		descBuf = []byte{} // an empty description: the host reports ErrNoProcessor's text
		return abi.Pack(0, 0)
	}
	d := p.Describe()
	descBuf = abi.AppendDescription(descBuf[:0], &d)
	return pack(descBuf)
}

//go:wasmexport berth_handle
func exportHandle(ptr unsafe.Pointer, n uint32) uint64 {
	return pack(exports.handle(registered, unsafe.Slice((*byte)(ptr), n), hostPorts))
}

func pack(b []byte) uint64 {
	if len(b) == 0 {
		return 0
	}
	return abi.Pack(uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b)))), uint32(len(b)))
}

var hostPorts = Ports{Log: hostLogger{}, HTTP: hostHTTPClient{}, KV: hostKV{}, Commands: hostCommands{}, Config: hostConfigReader{}}

// call makes a host call with req and returns its decoded reply.
func call(fn func(unsafe.Pointer, uint32) int64, req []byte) (abi.Reply, error) {
	n := fn(unsafe.Pointer(unsafe.SliceData(req)), uint32(len(req)))
	if n < 0 {
		return abi.Reply{}, ClassHost.New(fmt.Sprintf("host call failed with code %d", n))
	}
	buf := make([]byte, n)
	if n > 0 {
		hostTakeReply(unsafe.Pointer(unsafe.SliceData(buf)), uint32(n))
	}
	return abi.DecodeReply(buf)
}

type hostLogger struct{}

// log sends msg with its fields as fields (abi.EncodeLogLine), so that the
// host logs them as such, not flattened into the message.
func (hostLogger) log(level uint32, msg string, kv []any) {
	b := abi.EncodeLogLine(msg, kv)
	if len(b) == 0 {
		hostLog(level, nil, 0)
		return
	}
	hostLog(level, unsafe.Pointer(&b[0]), uint32(len(b)))
}

func (l hostLogger) Debug(msg string, kv ...any) { l.log(abi.LogDebug, msg, kv) }
func (l hostLogger) Info(msg string, kv ...any)  { l.log(abi.LogInfo, msg, kv) }
func (l hostLogger) Warn(msg string, kv ...any)  { l.log(abi.LogWarn, msg, kv) }
func (l hostLogger) Error(msg string, kv ...any) { l.log(abi.LogError, msg, kv) }

type hostHTTPClient struct{}

func (hostHTTPClient) Do(req *Request) (*Response, error) {
	r := abi.HTTPRequest{Method: req.Method, URL: req.URL, Body: req.Body}
	if r.Method == "" {
		r.Method = "GET"
	}
	for k, v := range req.Header {
		r.Headers = append(r.Headers, abi.Header{Name: k, Value: v})
	}
	reply, err := call(hostHTTP, abi.AppendHTTPRequest(nil, &r))
	if err != nil {
		return nil, err
	}
	if reply.Code != abi.ReplyOK {
		return nil, ReplyError(req.Method+" "+req.URL, &reply)
	}
	hr, err := abi.DecodeHTTPResponse(reply.Body)
	if err != nil {
		return nil, ClassHost.Wrap(err)
	}
	resp := &Response{Status: int(hr.Status), Header: make(map[string]string, len(hr.Headers)), Body: hr.Body}
	for _, h := range hr.Headers {
		resp.Header[h.Name] = h.Value
	}
	return resp, nil
}

type hostKV struct{}

func (hostKV) Get(key string) ([]byte, bool, error) {
	reply, err := call(hostKVGet, []byte(key))
	if err != nil {
		return nil, false, err
	}
	switch reply.Code {
	case abi.ReplyOK:
		return reply.Body, true, nil
	case abi.ReplyNotFound:
		return nil, false, nil
	default:
		return nil, false, ReplyError("kv get "+key, &reply)
	}
}

func (hostKV) Put(key string, value []byte) error {
	reply, err := call(hostKVPut, abi.AppendKVPut(nil, &abi.KVPut{Key: key, Value: value}))
	if err == nil && reply.Code != abi.ReplyOK {
		err = ReplyError("kv put "+key, &reply)
	}
	return err
}

func (hostKV) Delete(key string) error {
	reply, err := call(hostKVDelete, []byte(key))
	if err == nil && reply.Code != abi.ReplyOK && reply.Code != abi.ReplyNotFound {
		err = ReplyError("kv delete "+key, &reply)
	}
	return err
}

type hostCommands struct{}

func (hostCommands) Send(cmd Command) error {
	c := abi.Command{AggregateType: cmd.AggregateType, AggregateID: cmd.AggregateID, Type: cmd.Type, Payload: cmd.Payload}
	reply, err := call(hostCommand, abi.AppendCommand(nil, &c))
	if err == nil && reply.Code != abi.ReplyOK {
		err = ReplyError("send command "+cmd.Type, &reply)
	}
	return err
}

type hostConfigReader struct{}

func (hostConfigReader) Get(key string) (string, bool) {
	reply, err := call(hostConfig, []byte(key))
	if err != nil || reply.Code != abi.ReplyOK {
		return "", false
	}
	return string(reply.Body), true
}
