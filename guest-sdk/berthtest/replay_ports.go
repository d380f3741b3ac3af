package berthtest

import (
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/berthhq/berth/guest-sdk/berth"
	"github.com/berthhq/berth/wasm/abi"
)

// recording answers a replayed handler's host calls from a capsule's calls
// and keeps the calls as made, matching as the sandbox's replay does (both
// through abi.CapsuleMatcher): a call gets the answer of the first recorded
// call not yet used (log lines aside) if it asks the same; else of a later
// unused one that does, a departure "out of order"; else the error "not
// recorded in the capsule", a departure too. Log lines need no answer:
// they are kept, never matched, and never depart.
type recording struct {
	t   TB
	key string

	mu         sync.Mutex
	recorded   []abi.CapsuleCall
	match      *abi.CapsuleMatcher // over recorded
	calls      []abi.CapsuleCall
	departures []Departure
	deadline   int  // index in calls of the call the deadline passed in, or -1
	stopped    bool // the replay is over: a call is neither answered nor kept
}

func newRecording(t TB, key string, recorded []abi.CapsuleCall) *recording {
	return &recording{t: t, key: key, recorded: recorded, match: abi.NewCapsuleMatcher(recorded), deadline: -1}
}

// deadlinePassed is the panic a port raises for a call during which the
// recorded attempt's deadline passed: the guest never ran again after it.
type deadlinePassed struct{}

// answer keeps call and returns the recorded call that answers it (nil:
// none, and the call is a departure, answered abi.ErrNotRecorded; or a log line).
// A call the recorded deadline passed in does not return: it panics
// deadlinePassed.
func (r *recording) answer(call abi.CapsuleCall) *abi.CapsuleCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return &abi.CapsuleCall{Reply: &abi.CapsuleReply{Code: abi.ReplyCodeName(abi.ReplyError), Message: "the replay is over"}}
	}
	if call.Fn == abi.CallLog {
		r.calls = append(r.calls, call)
		return nil
	}
	j, due, note := r.match.Match(&call)
	dep := Departure{Index: len(r.calls), Note: note}
	if due >= 0 {
		dep.Recorded = &r.recorded[due]
	}
	if j < 0 {
		call.Reply = &abi.CapsuleReply{Code: abi.ReplyCodeName(abi.ReplyError), Message: abi.ErrNotRecorded}
		dep.Call = call
		r.departures = append(r.departures, dep)
		r.calls = append(r.calls, call)
		return nil
	}
	rec := &r.recorded[j]
	call.Reply = rec.Reply
	if call.HTTP != nil && rec.HTTP != nil {
		call.HTTP.Response = rec.HTTP.Response
	}
	if rec.Deadline {
		call.Deadline = true
		r.deadline, r.stopped = len(r.calls), true
		r.calls = append(r.calls, call)
		panic(deadlinePassed{})
	}
	if note != "" {
		dep.Call = call
		r.departures = append(r.departures, dep)
	}
	r.calls = append(r.calls, call)
	return rec
}

// stop ends the replay: later calls (of a handler left running) are
// neither answered from the recording nor kept.
func (r *recording) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped = true
}

// result returns the calls as made and the departures.
func (r *recording) result() ([]abi.CapsuleCall, []Departure, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls, r.departures, r.deadline
}

// reply is the Reply the guest got from a recorded call, or (nil) the
// not-recorded answer.
func reply(rec *abi.CapsuleCall) abi.Reply {
	if rec == nil {
		return abi.Reply{Code: abi.ReplyError, Message: abi.ErrNotRecorded}
	}
	return rec.RecordedReply()
}

// ports returns the handler's ports, answering as the module's ports
// answer the host's replies (berth.ReplyError).
func (r *recording) ports() berth.Ports {
	return berth.Ports{Log: replayLog{r}, HTTP: replayHTTP{r}, KV: replayKV{r}, Commands: replayCommands{r}, Config: replayConfig{r}}
}

type replayHTTP struct{ r *recording }

func (h replayHTTP) Do(req *berth.Request) (*berth.Response, error) {
	if req == nil {
		return nil, berth.ClassHost.New("http: nil request")
	}
	call := abi.CapsuleCall{Fn: abi.CallHTTP, HTTP: &abi.CapsuleHTTP{Method: abi.HTTPMethod(req.Method), URL: req.URL, Body: clone(req.Body)}}
	for _, k := range slices.Sorted(maps.Keys(req.Header)) {
		call.HTTP.Headers = append(call.HTTP.Headers, abi.Header{Name: k, Value: req.Header[k]})
	}
	rec := h.r.answer(call)
	rep := reply(rec)
	if rep.Code != abi.ReplyOK {
		return nil, berth.ReplyError(req.Method+" "+req.URL, &rep)
	}
	if rec.HTTP == nil || rec.HTTP.Response == nil {
		return nil, berth.ClassHost.New(req.Method + " " + req.URL + ": the capsule holds no response to this call")
	}
	res := rec.HTTP.Response
	resp := &berth.Response{Status: int(res.Status), Header: make(map[string]string, len(res.Headers)), Body: clone(res.Body)}
	for _, hd := range res.Headers {
		resp.Header[hd.Name] = hd.Value
	}
	return resp, nil
}

type replayKV struct{ r *recording }

func (kv replayKV) Get(key string) ([]byte, bool, error) {
	rep := reply(kv.r.answer(abi.CapsuleCall{Fn: abi.CallKVGet, Key: key}))
	switch rep.Code {
	case abi.ReplyOK:
		return clone(rep.Body), true, nil
	case abi.ReplyNotFound:
		return nil, false, nil
	default:
		return nil, false, berth.ReplyError("kv get "+key, &rep)
	}
}

func (kv replayKV) Put(key string, value []byte) error {
	rep := reply(kv.r.answer(abi.CapsuleCall{Fn: abi.CallKVPut, Key: key, Value: clone(value)}))
	if rep.Code != abi.ReplyOK {
		return berth.ReplyError("kv put "+key, &rep)
	}
	return nil
}

func (kv replayKV) Delete(key string) error {
	rep := reply(kv.r.answer(abi.CapsuleCall{Fn: abi.CallKVDelete, Key: key}))
	if rep.Code != abi.ReplyOK && rep.Code != abi.ReplyNotFound {
		return berth.ReplyError("kv delete "+key, &rep)
	}
	return nil
}

type replayCommands struct{ r *recording }

func (c replayCommands) Send(cmd berth.Command) error {
	rep := reply(c.r.answer(abi.CapsuleCall{Fn: abi.CallCommand, Command: &abi.CapsuleCommand{
		AggregateType: cmd.AggregateType, AggregateID: cmd.AggregateID, Type: cmd.Type, Payload: clone(cmd.Payload)}}))
	if rep.Code != abi.ReplyOK {
		return berth.ReplyError("send command "+cmd.Type, &rep)
	}
	return nil
}

type replayConfig struct{ r *recording }

func (c replayConfig) Get(key string) (string, bool) {
	rep := reply(c.r.answer(abi.CapsuleCall{Fn: abi.CallConfig, Key: key}))
	if rep.Code != abi.ReplyOK {
		return "", false
	}
	return string(rep.Body), true
}

// replayLog keeps a line as the module writes it (abi.EncodeLogLine) and
// writes it to the test's log.
type replayLog struct{ r *recording }

var logLevels = [...]string{abi.LogDebug: "debug", abi.LogInfo: "info", abi.LogWarn: "warn", abi.LogError: "error"}

func (l replayLog) line(level int, msg string, kv []any) {
	l.r.answer(abi.CapsuleCall{Fn: abi.CallLog, Log: &abi.CapsuleLog{Level: logLevels[level], Text: abi.EncodeLogLine(msg, kv)}})
	l.r.mu.Lock() // held, so that no line reaches the test's log once the replay is over
	defer l.r.mu.Unlock()
	if !l.r.stopped {
		l.r.t.Logf("%s", LogLine{Level: logLevels[level], Key: l.r.key, Msg: msg, KV: kv})
	}
}

func (l replayLog) Debug(msg string, kv ...any) { l.line(abi.LogDebug, msg, kv) }
func (l replayLog) Info(msg string, kv ...any)  { l.line(abi.LogInfo, msg, kv) }
func (l replayLog) Warn(msg string, kv ...any)  { l.line(abi.LogWarn, msg, kv) }
func (l replayLog) Error(msg string, kv ...any) { l.line(abi.LogError, msg, kv) }

// String describes the departure: "call #1 POST http://…: not recorded:
// answered error …" (calls and recorded calls numbered from 0, as the
// sandbox's notes number them).
func (d Departure) String() string {
	return fmt.Sprintf("call #%d %s: %s", d.Index, callString(&d.Call), d.Note)
}

// callString names a call: its fn and request.
func callString(c *abi.CapsuleCall) string {
	switch {
	case c.HTTP != nil:
		return c.HTTP.Method + " " + c.HTTP.URL
	case c.Command != nil:
		return fmt.Sprintf("command %s to %s %s", c.Command.Type, c.Command.AggregateType, c.Command.AggregateID)
	case c.Log != nil:
		return "log " + c.Log.Level
	default:
		return c.Fn + " " + c.Key
	}
}
