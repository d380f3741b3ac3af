package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"time"

	"github.com/berthhq/berth/wasm/abi"
)

// Replay runs the attempt c records on m, once, answering its host calls from the recording.
//
// It runs on an instance of its own, made for it and closed after it: its
// _initialize sees a fixed clock and deterministic random bytes, its call
// the recorded event (deadline field included), clock readings and random
// bytes, under the recorded time budget of real time. No host call reaches
// a port: HTTP, key/value, commands and config are all answered from c, in
// order (ABI.md, Attempt capsules, Replay). m should be loaded under c's
// limits (ModuleConfigOf), and compiled (Config.Tiering CompiledOnly): on
// the interpreter a call runs many times slower than the recorded one did,
// under the same budget of real time.
//
// c is validated first (abi.Capsule.Validate): a capsule no host could
// have recorded is refused with an error naming the field, and nothing of
// it runs. The replay ends by the recorded budget or when ctx ends,
// whichever is first; a recorded budget of 0 (none) leaves ctx as the only
// bound, so give ctx one (`berth parked replay --max-time`).
func (m *Module) Replay(ctx context.Context, c *abi.Capsule) (Replayed, error) {
	return m.replay(ctx, c, nil)
}

// replay is Replay on an instance of rs (nil: a fresh one, closed after).
func (m *Module) replay(ctx context.Context, c *abi.Capsule, rs *Replays) (Replayed, error) {
	if err := c.Validate(); err != nil {
		return Replayed{}, err
	}
	rp := newReplayer(c)
	ev := c.Event.ToEvent()
	budget := time.Duration(c.Limits.TimeoutMillis) * time.Millisecond
	start := time.Now()
	var inst *instance
	err := ctx.Err()
	switch {
	case err != nil:
	case rs == nil:
		inst, err = m.makeInstance(ctx, time.Time{}, rp)
	default:
		inst, err = rs.take(ctx, rp)
	}
	if err != nil {
		o := m.noInstance(ctx, start, time.Time{}, budget, "before it started", err)
		rc := &abi.Capsule{Format: abi.CapsuleFormat, RecordedAt: time.Now().UTC(), Event: c.Event,
			Module: abi.CapsuleModule{Name: m.name, SHA256: m.sha256}, Calls: []abi.CapsuleCall{}, Outcome: capsuleOutcome(&o, "")}
		return Replayed{Outcome: o, Capsule: rc}, nil
	}
	var own time.Time
	if budget > 0 {
		own = time.Now().Add(budget)
	}
	o := m.run(ctx, inst, &ev, Ports{}, own, budget)
	o.Duration = time.Since(start)
	inst.end()
	if rs == nil {
		inst.close()
	} else {
		rs.give(inst, o.Kind)
	}
	r := Replayed{Outcome: o, Capsule: o.Capsule}
	r.Capsule.Subscription = c.Subscription
	r.Capsule.Limits = c.Limits
	if !failed(o.Kind) {
		r.Outcome.Capsule = nil
	}
	for _, d := range rp.departures {
		dep := Departure{Call: d.call, Note: d.note}
		if d.call < len(r.Capsule.Calls) {
			dep.Made = r.Capsule.Calls[d.call]
		}
		if d.recorded >= 0 {
			rec := c.Calls[d.recorded]
			dep.Recorded = &rec
		}
		r.Departures = append(r.Departures, dep)
	}
	return r, nil
}

// Replayed is how a replay went.
type Replayed struct {
	// Outcome is the replay's outcome, as Invoke's.
	Outcome Outcome
	// Capsule is the replay's own recording (calls as made and the answers
	// given, clocks, random, outcome), always set, also on success, and
	// never cut by the size cap.
	Capsule *abi.Capsule
	// Departures lists every host call where the replay departed from the
	// recording, in order.
	Departures []Departure
}

// Departure is a host call where a replay departed from the recording.
type Departure struct {
	// Call is the call's index in Replayed.Capsule.Calls.
	Call int
	// Made is what the module asked.
	Made abi.CapsuleCall
	// Recorded is the recorded call at that place, nil when the recording
	// had none there.
	Recorded *abi.CapsuleCall
	// Note says how the call departed and how it was answered.
	Note string
}

// Reproduced says whether the replay ended as recorded did: the same kind
// and, for a failure, the same classes and message.
func (r *Replayed) Reproduced(recorded abi.CapsuleOutcome) bool {
	got := r.Capsule.Outcome
	if got.Kind != recorded.Kind {
		return false
	}
	if got.Kind == GuestFailure.String() {
		return slices.Equal(got.Classes, recorded.Classes) && got.Message == recorded.Message
	}
	return true
}

// OutcomeText says an outcome in one line: "UnknownBuyer: the notification
// service does not know buyer buyer-404" (a failure: its nearest class and
// message), "timeout: the call ran past its 300ms deadline", "success".
func OutcomeText(o abi.CapsuleOutcome) string {
	switch {
	case o.Kind == Success.String():
		return o.Kind
	case o.Kind == GuestFailure.String() && len(o.Classes) > 0:
		return o.Classes[0] + ": " + o.Message
	case o.Kind == GuestFailure.String():
		return o.Message
	}
	return o.Kind + ": " + o.Message
}

// ModuleConfigOf returns the module settings a capsule's attempt ran
// under (memory limit, allowed hosts), to load the module a replay runs on.
func ModuleConfigOf(c *abi.Capsule) ModuleConfig {
	return ModuleConfig{MemoryLimitPages: c.Limits.MemoryLimitPages, AllowedHosts: slices.Clone(c.Limits.AllowedHosts)}
}

// ErrNotRecorded is the message of the error reply a replay gives a host
// call the capsule has no answer for (abi.ErrNotRecorded).
const ErrNotRecorded = abi.ErrNotRecorded

// replayer answers one replay's host calls, clocks and random bytes from
// a capsule (callState.replay).
type replayer struct {
	c          *abi.Capsule
	match      *abi.CapsuleMatcher // over c.Calls
	departures []departure

	wall, nano clockReplay
	// shift moves the monotonic readings of a call on a reused instance
	// past the last one the instance gave (Replays): its clock never runs
	// backwards, as a live instance's does not. 0 on a fresh instance.
	shift           int64
	initWall        int64 // _initialize's fixed clocks, advancing 1 µs a reading
	initNano        int64
	rnd             []byte
	initRand, spare randStream
}

type departure struct {
	call, recorded int
	note           string
}

func newReplayer(c *abi.Capsule) *replayer {
	rp := &replayer{c: c, match: abi.NewCapsuleMatcher(c.Calls), rnd: c.Random,
		initRand: randStream{label: "init"}, spare: randStream{label: "call"}}
	rp.initWall = c.Event.DeadlineUnixNano - c.Limits.TimeoutMillis*int64(time.Millisecond)
	if len(c.Clock.Walltime) > 0 {
		rp.initWall = c.Clock.Walltime[0] - int64(time.Second)
	}
	if len(c.Clock.Nanotime) > 0 {
		rp.initNano = max(c.Clock.Nanotime[0]-int64(time.Second), 0)
	}
	rp.wall = clockReplay{readings: c.Clock.Walltime}
	rp.nano = clockReplay{readings: c.Clock.Nanotime}
	return rp
}

// clockReplay gives a clock's recorded readings in order, then goes on
// from the last (or from a base, with none) at real speed.
type clockReplay struct {
	readings []int64
	i        int
	last     int64
	since    time.Time // when last was given
}

func (c *clockReplay) next(base int64) int64 {
	if c.i < len(c.readings) {
		c.last, c.since = c.readings[c.i], time.Now()
		c.i++
		return c.last
	}
	if c.since.IsZero() {
		c.last, c.since = base, time.Now()
	}
	return c.last + int64(time.Since(c.since))
}

func (rp *replayer) walltime(init bool) int64 {
	if init {
		rp.initWall += int64(time.Microsecond)
		return rp.initWall
	}
	return rp.wall.next(rp.initWall)
}

func (rp *replayer) nanotime(init bool) int64 {
	if init {
		rp.initNano += int64(time.Microsecond)
		return rp.initNano
	}
	return rp.nano.next(rp.initNano) + rp.shift
}

// after readies rp for a call on an instance whose monotonic clock last
// read floor: the call's first reading (the first recorded, or where
// _initialize's clock ended) comes after it, its readings moved as one
// when needed (the differences between them are the recorded ones).
func (rp *replayer) after(floor int64) {
	first := rp.initNano
	if len(rp.nano.readings) > 0 {
		first = rp.nano.readings[0]
	}
	if first <= floor {
		rp.shift = floor + int64(time.Microsecond) - first
	}
}

// random fills p with the recorded random bytes, in order, then with the
// deterministic stream; _initialize gets a deterministic stream of its own.
func (rp *replayer) random(p []byte, init bool) {
	if init {
		rp.initRand.read(p)
		return
	}
	n := copy(p, rp.rnd)
	rp.rnd = rp.rnd[n:]
	rp.spare.read(p[n:])
}

// randStream is the deterministic random bytes of a replay (ABI.md):
// block i is SHA-256("berth-capsule/1 replay " + label + " " + i as 8
// bytes big-endian), the blocks back to back.
type randStream struct {
	label string
	block uint64
	buf   []byte
}

func (s *randStream) read(p []byte) {
	for len(p) > 0 {
		if len(s.buf) == 0 {
			h := sha256.New()
			h.Write([]byte(abi.CapsuleFormat + " replay " + s.label + " "))
			h.Write(binary.BigEndian.AppendUint64(nil, s.block))
			s.buf, s.block = h.Sum(nil), s.block+1
		}
		n := copy(p, s.buf)
		p, s.buf = p[n:], s.buf[n:]
	}
}

// answer answers a host call from the recording and says whether the
// recorded call ran into the deadline (the replay's call ends there too).
func (rp *replayer) answer(cs *callState, fn string, req []byte) (abi.Reply, bool) {
	made := abi.CapsuleCall{Fn: fn}
	(&redactor{}).request(&made, req)
	j, due, note := rp.match.Match(&made)
	if note != "" { // the call's index in the replay's capsule is len(cs.rec.calls)
		rp.departures = append(rp.departures, departure{len(cs.rec.calls), due, note})
	}
	if j < 0 {
		return abi.Reply{Code: abi.ReplyError, Message: ErrNotRecorded}, false
	}
	rc := &rp.c.Calls[j]
	reply := rc.RecordedReply()
	if res := rc.HTTP; res != nil && res.Response != nil && rc.Reply != nil {
		if _, known := abi.ReplyCode(rc.Reply.Code); known { // else RecordedReply answered an error
			reply.Body = abi.AppendHTTPResponse(nil, &abi.HTTPResponse{Status: res.Response.Status, Headers: res.Response.Headers, Body: res.Response.Body})
		}
	}
	return reply, rc.Deadline
}
