package sandbox

import (
	"crypto/rand"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"
	_ "unsafe" // for go:linkname

	"github.com/berthhq/berth/wasm/abi"
)

// recording is an instance's arena for the attempt capsule of its current
// call (ABI.md, Attempt capsules): every host call with its raw request and
// encoded reply, the log lines, the clock readings and the random bytes the
// guest was given. It is reset at each call's begin by truncating its
// slices, so that a warm instance records without allocating; only a
// failed call turns it into a capsule.
type recording struct {
	on     bool       // recording: during a call, never during _initialize
	calls  []recCall  // in the order the guest made them
	data   []byte     // the calls' request and reply bytes, back to back
	wall   []int64    // walltime readings, unix nanoseconds
	nano   []int64    // nanotime readings
	random []byte     // random bytes given
	cut    recordCuts // what the arena's own bounds left out
}

// recCall is one host call in the arena; its bytes are data[req:rep] (the
// request, or a log line's text) and data[rep:end] (the encoded reply).
type recCall struct {
	fn            string
	level         uint32 // a log line's
	req, rep, end int
	deadline      bool // the call's deadline passed during it
}

// recordCuts counts what the arena dropped to stay within its bounds.
type recordCuts struct{ bytes, wall, nano, random int }

// Bounds of one call's arena: beyond them a call's bytes, readings and
// random bytes are counted, not kept (the capsule says so), so that a long
// or chatty call cannot grow the host's memory. An arena that grew past
// arenaKeep is dropped at the next call's begin.
const (
	arenaMaxBytes    = 4 << 20
	arenaMaxReadings = 1 << 14
	arenaMaxRandom   = 64 << 10
	arenaKeep        = 256 << 10
)

// reset readies the arena for a call (on: record it).
func (r *recording) reset(on bool) {
	if cap(r.data) > arenaKeep {
		r.data = nil
	}
	r.on = on
	r.calls, r.data, r.wall, r.nano, r.random = r.calls[:0], r.data[:0], r.wall[:0], r.nano[:0], r.random[:0]
	r.cut = recordCuts{}
}

// call records a host call: its request and encoded reply.
func (r *recording) call(fn string, req, reply []byte, deadline bool) {
	if !r.on {
		return
	}
	c := recCall{fn: fn, req: len(r.data), deadline: deadline}
	if len(r.data)+len(req)+len(reply) > arenaMaxBytes {
		r.cut.bytes += len(req) + len(reply)
		req, reply = nil, nil
	}
	r.data = append(r.data, req...)
	c.rep = len(r.data)
	r.data = append(r.data, reply...)
	c.end = len(r.data)
	r.calls = append(r.calls, c)
}

// log records a log line.
func (r *recording) log(level uint32, text []byte) {
	if !r.on {
		return
	}
	r.call(abi.CallLog, text, nil, false)
	r.calls[len(r.calls)-1].level = level
}

// reading records a clock reading in list, or counts it in cut.
func (r *recording) reading(list *[]int64, cut *int, ns int64) {
	if r.on {
		if len(*list) < arenaMaxReadings {
			*list = append(*list, ns)
		} else {
			*cut++
		}
	}
}

func (r *recording) rand(p []byte) {
	if r.on {
		if room := arenaMaxRandom - len(r.random); room >= len(p) {
			r.random = append(r.random, p...)
		} else {
			r.random = append(r.random, p[:max(room, 0)]...)
			r.cut.random += len(p) - max(room, 0)
		}
	}
}

// runtimeNanotime reads the runtime's monotonic clock, as wazero's WithSysNanotime
// does: cheaper than time.Since, which reads the wall clock too.
//
//go:linkname runtimeNanotime runtime.nanotime
func runtimeNanotime() int64

// walltime is the instance's WASI wall clock: the real one, recorded, or
// in a replay the recording's (callState.replay).
func (cs *callState) walltime() (sec int64, nsec int32) {
	var ns int64
	if cs.replay != nil {
		ns = cs.replay.walltime(cs.ev == nil)
	} else {
		ns = time.Now().UnixNano()
	}
	cs.rec.reading(&cs.rec.wall, &cs.rec.cut.wall, ns)
	return ns / 1e9, int32(ns % 1e9)
}

// nanotime is the instance's WASI monotonic clock, as walltime.
func (cs *callState) nanotime() int64 {
	var ns int64
	if cs.replay != nil {
		ns = cs.replay.nanotime(cs.ev == nil)
		cs.replayNano = ns
	} else {
		ns = runtimeNanotime()
	}
	cs.rec.reading(&cs.rec.nano, &cs.rec.cut.nano, ns)
	return ns
}

// randSource is the instance's WASI random source: crypto/rand, recorded,
// or in a replay the recording's.
type randSource struct{ cs *callState }

func (r randSource) Read(p []byte) (int, error) {
	if rp := r.cs.replay; rp != nil {
		rp.random(p, r.cs.ev == nil)
	} else if _, err := rand.Read(p); err != nil {
		return 0, err
	}
	r.cs.rec.rand(p)
	return len(p), nil
}

// pastDeadline says whether the call's deadline has passed (or its
// caller gave up), without ending the call.
func (cs *callState) pastDeadline() bool {
	if cs.expired.Load() {
		return true
	}
	own := cs.own.Load()
	return (own != 0 && time.Now().UnixNano() >= own) || (cs.ctx != nil && cs.ctx.Err() != nil)
}

// failed says whether an outcome is one a capsule is made of.
func failed(k OutcomeKind) bool {
	return k == GuestFailure || k == Timeout || k == Trap || k == MemoryExceeded
}

// capsule builds the attempt capsule of inst's call of ev from its arena,
// within the sandbox's size cap (capped false: whole).
func (m *Module) capsule(inst *instance, ev *abi.Event, budget time.Duration, o *Outcome, stdout string, capped bool) *abi.Capsule {
	rec := &inst.cs.rec
	cfg := &m.s.cfg
	c := &abi.Capsule{
		Format:     abi.CapsuleFormat,
		RecordedAt: time.Now().UTC(),
		Module:     abi.CapsuleModule{Name: m.name, SHA256: m.sha256},
		Limits: abi.CapsuleLimits{TimeoutMillis: budget.Milliseconds(), MemoryLimitPages: m.cfg.MemoryLimitPages,
			AllowedHosts: append([]string(nil), m.cfg.AllowedHosts...), MaxResponseBytes: cfg.MaxResponseBytes},
		Event:   abi.CapsuleEventOf(ev),
		Calls:   make([]abi.CapsuleCall, 0, len(rec.calls)),
		Clock:   abi.CapsuleClock{Walltime: append([]int64(nil), rec.wall...), Nanotime: append([]int64(nil), rec.nano...)},
		Random:  append(abi.Blob(nil), rec.random...),
		Outcome: capsuleOutcome(o, stdout),
	}
	red := redactor{names: cfg.CapsuleRedactHeaders, config: cfg.CapsuleRedactConfig}
	for _, rc := range rec.calls {
		c.Calls = append(c.Calls, red.call(rc, rec.data))
	}
	c.RedactedHeaders, c.RedactedConfig = red.redacted, red.redactedConfig
	for _, n := range []struct {
		what string
		n    int
	}{{"bytes of host calls", rec.cut.bytes}, {"walltime readings", rec.cut.wall}, {"nanotime readings", rec.cut.nano}, {"random bytes", rec.cut.random}} {
		if n.n > 0 {
			c.Truncated = append(c.Truncated, fmt.Sprintf("%d %s past the recording's bounds not kept", n.n, n.what))
		}
	}
	if capped {
		capCapsule(c, cfg.CapsuleMaxBytes)
	}
	return c
}

// capsuleOutputBytes bounds each of the guest's stdout and stderr in a
// capsule.
const capsuleOutputBytes = 8 << 10

func capsuleOutcome(o *Outcome, stdout string) abi.CapsuleOutcome {
	co := abi.CapsuleOutcome{Kind: o.Kind.String(), Message: o.Message,
		Stdout: clipOutput(stdout), Stderr: clipOutput(o.Stderr)}
	if o.Kind == GuestFailure {
		f := &o.Failure
		co.Classes, co.Message, co.Code, co.RetryAfterMillis = append([]string(nil), f.Classes...), f.Message, f.Code, f.RetryAfterMillis
		co.FailureKind = f.Kind.String()
	}
	return co
}

func clipOutput(s string) string {
	if len(s) > capsuleOutputBytes {
		return s[:capsuleOutputBytes] + fmt.Sprintf("\n… %d bytes not kept", len(s)-capsuleOutputBytes)
	}
	return s
}

// redactor structures recorded calls, replacing the values of the HTTP
// headers it names (case-insensitively) and of the config keys its
// patterns match, and noting which it replaced.
type redactor struct {
	names, config            []string
	redacted, redactedConfig []string
}

// secretConfig reports whether key's value is not kept: a key a pattern
// matches, in any case.
func (r *redactor) secretConfig(key string) bool {
	for _, p := range r.config {
		if ok, _ := path.Match(strings.ToLower(p), strings.ToLower(key)); ok {
			return true
		}
	}
	return false
}

// Redacted is the value a redacted header is stored with.
const Redacted = "[redacted]"

func (r *redactor) headers(hs []abi.Header) []abi.Header {
	out := make([]abi.Header, len(hs))
	for i, h := range hs {
		out[i] = h
		for _, n := range r.names {
			if strings.EqualFold(n, h.Name) {
				out[i].Value = Redacted
				if !slices.ContainsFunc(r.redacted, func(v string) bool { return strings.EqualFold(v, h.Name) }) {
					r.redacted = append(r.redacted, h.Name)
				}
			}
		}
	}
	return out
}

// call turns an arena call into its capsule form.
func (r *redactor) call(rc recCall, data []byte) abi.CapsuleCall {
	req, rep := data[rc.req:rc.rep], data[rc.rep:rc.end]
	c := abi.CapsuleCall{Fn: rc.fn, Deadline: rc.deadline}
	if rc.fn == abi.CallLog {
		c.Log = &abi.CapsuleLog{Level: logLevelName(rc.level), Text: append(abi.Blob(nil), req...)}
		return c
	}
	r.request(&c, req)
	if reply, err := abi.DecodeReply(rep); err == nil {
		c.Reply = abi.CapsuleReplyOf(&reply)
		if rc.fn == abi.CallConfig && reply.Code == abi.ReplyOK && r.secretConfig(c.Key) {
			c.Reply.Body = abi.Blob(Redacted)
			if !slices.Contains(r.redactedConfig, c.Key) {
				r.redactedConfig = append(r.redactedConfig, c.Key)
			}
		}
		if rc.fn == abi.CallHTTP && reply.Code == abi.ReplyOK && c.HTTP != nil {
			if res, err := abi.DecodeHTTPResponse(reply.Body); err == nil {
				c.HTTP.Response = &abi.CapsuleHTTPRes{Status: res.Status, Headers: r.headers(res.Headers), Body: append(abi.Blob(nil), res.Body...)}
				c.Reply.Body = nil
			}
		}
	}
	return c
}

// request fills c's request fields from the raw request of its Fn.
func (r *redactor) request(c *abi.CapsuleCall, req []byte) {
	switch c.Fn {
	case abi.CallHTTP:
		if h, err := abi.DecodeHTTPRequest(req); err == nil {
			c.HTTP = &abi.CapsuleHTTP{Method: h.Method, URL: h.URL, Headers: r.headers(h.Headers), Body: append(abi.Blob(nil), h.Body...)}
		}
	case abi.CallKVGet, abi.CallKVDelete, abi.CallConfig:
		c.Key = string(req)
	case abi.CallKVPut:
		if p, err := abi.DecodeKVPut(req); err == nil {
			c.Key, c.Value = p.Key, append(abi.Blob(nil), p.Value...)
		}
	case abi.CallCommand:
		if cmd, err := abi.DecodeCommand(req); err == nil {
			c.Command = &abi.CapsuleCommand{AggregateType: cmd.AggregateType, AggregateID: cmd.AggregateID,
				Type: cmd.Type, Payload: append(abi.Blob(nil), cmd.Payload...)}
		}
	}
}

func logLevelName(level uint32) string {
	switch level {
	case abi.LogDebug:
		return "debug"
	case abi.LogWarn:
		return "warn"
	case abi.LogError:
		return "error"
	}
	return "info"
}
