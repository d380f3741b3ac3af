package berthtest

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/berthhq/berth/guest-sdk/berth"
	"github.com/berthhq/berth/wasm/abi"
)

// Replay runs the handler the capsule's event names, of p, natively,
// against the capsule's recording, so that a parked failure becomes a
// regression test in one step. capsulePath is an attempt capsule
// (abi.Capsule, "berth-capsule/1"), as
// GET /v1/subscriptions/{name}/parked/{type}/{id}/capsule serves it or
// `berth parked replay --save` writes it. Replay fails t at once on a
// capsule it cannot read or an event p has no handler for.
//
// The handler gets the capsule's event exactly as the guest received it
// (invocation key, attempt, deadline, payload) and ports that answer from
// the recording, matched as the sandbox's replay matches: a host call gets
// the answer of the next recorded call (the first not yet used) if it asks
// the same (the same fn and HTTP method, URL and body; key/value and config
// key, and a put's value; command), else of a later unused one that does,
// listed in Departures as out of order. A call the recording has no answer
// for is answered with a berth.ClassHost error "…: not recorded in the
// capsule" (a config read: no value) and listed in Departures: run a fix
// against a capsule to see whether it handles the event and which calls it
// makes that the failing attempt did not. Log lines are kept in Calls,
// never matched. Errors are the ones the module's ports give for the
// recorded replies (berth.ReplyError). A call during which the recorded
// attempt's deadline passed does not return: the handler is stopped there
// and the outcome is a timeout, as it was.
//
// Native code cannot have its clocks and random bytes replaced: the
// handler reads the test machine's time.Now and crypto/rand, not the
// capsule's Clock and Random, and its Deadline, as recorded, has passed.
// The wasm replay, `berth parked replay` (with --module FIX.wasm for a
// fix), runs the compiled module with the recorded clocks and random
// bytes, under the recorded limits; a guest trap or a memory limit is
// reproduced only there. A handler that runs past the capsule's timeout
// natively is reported as a timeout and left running.
func Replay(t TB, p *berth.Processor, capsulePath string) *Replayed {
	t.Helper()
	b, err := os.ReadFile(capsulePath)
	if err != nil {
		t.Fatalf("berthtest: replay: %v", err)
		return &Replayed{t: t, aborted: true}
	}
	c, err := abi.DecodeCapsule(b)
	if err != nil {
		t.Fatalf("berthtest: replay %s: %v", capsulePath, err)
		return &Replayed{t: t, aborted: true}
	}
	return ReplayCapsule(t, p, c)
}

// ReplayCapsule is Replay of a capsule already decoded.
func ReplayCapsule(t TB, p *berth.Processor, c *abi.Capsule) *Replayed {
	t.Helper()
	env := c.Event.ToEvent()
	r := &Replayed{Key: env.InvocationKey, Recorded: c.Outcome, t: t}
	if p == nil {
		t.Fatalf("berthtest: replay with a nil processor")
		return r.abort()
	}
	h := p.Handler(env.Handler)
	if h == nil || h.Func == nil {
		t.Fatalf("berthtest: replay: processor %s has no handler %q (the capsule's event names it)", p.Name, env.Handler)
		return r.abort()
	}
	if len(c.Truncated) > 0 { // the size cap left calls out: a replay departs where the recording ends
		t.Logf("berthtest: replay: the capsule was truncated: %s", strings.Join(c.Truncated, "; "))
	}
	rec := newRecording(t, env.InvocationKey, c.Calls)
	var res abi.Result
	var handlerErr error
	done := make(chan struct{})
	go func() { // so that a handler that never returns cannot hang the test
		defer close(done)
		res, handlerErr = runNative(p, h, &env, rec.ports())
	}()
	timeout := time.Duration(c.Limits.TimeoutMillis) * time.Millisecond
	if timeout <= 0 {
		<-done
	} else {
		timer := time.NewTimer(timeout)
		defer timer.Stop()
		select {
		case <-done:
		case <-timer.C:
			rec.stop()
			r.Calls, r.Departures, _ = rec.result()
			return r.timedOut(fmt.Sprintf("the handler ran past the capsule's timeout of %s", timeout))
		}
	}
	var deadline int
	r.Err = handlerErr
	r.Calls, r.Departures, deadline = rec.result()
	if deadline >= 0 {
		return r.timedOut(fmt.Sprintf("the attempt's deadline passed during call #%d, %s, as recorded", deadline, callString(&r.Calls[deadline])))
	}
	r.Outcome = outcomeOf(res)
	return r
}

// timedOut makes r's outcome a timeout, its error one of berth.ClassTimeout.
func (r *Replayed) timedOut(msg string) *Replayed {
	r.Err = berth.ClassTimeout.New(msg)
	r.Outcome = abi.CapsuleOutcome{Kind: "timeout", Classes: berth.ClassTimeout.Chain(), Message: msg}
	return r
}

// runNative runs handler h of p for env with the ports through a
// one-handler copy of p whose handler remembers the error it returned, so
// that expectations can look into it.
func runNative(p *berth.Processor, h *berth.Handler, env *abi.Event, ports berth.Ports) (abi.Result, error) {
	var handlerErr error
	run := &berth.Processor{Name: p.Name, Kind: p.Kind}
	run.On(h.Name, env.Type, func(c *berth.Context) error {
		handlerErr = h.Func(c)
		return handlerErr
	})
	return run.Dispatch(env, ports), handlerErr
}

// outcomeOf is a handler's result as a capsule names an outcome.
func outcomeOf(res abi.Result) abi.CapsuleOutcome {
	if res.Status != abi.StatusFailed {
		return abi.CapsuleOutcome{Kind: "success"}
	}
	f := res.Failure
	o := abi.CapsuleOutcome{Kind: "failure", Classes: f.Classes, Message: f.Message, Code: f.Code, RetryAfterMillis: f.RetryAfterMillis}
	if f.Kind != abi.KindUnspecified {
		o.FailureKind = f.Kind.String()
	}
	return o
}

// Departure is a host call of a replay where the handler departed from the
// recording, as the sandbox's replay lists them: a call the recording has
// no answer for (answered "not recorded in the capsule"), or one answered
// by a recorded call later than the next one (out of order).
type Departure struct {
	// Index is the call's place in Replayed.Calls, from 0.
	Index int
	// Call is the call as made, with the answer it got.
	Call abi.CapsuleCall
	// Recorded is the recorded call at that place (the first unused one),
	// nil when the recording had none left.
	Recorded *abi.CapsuleCall
	// Note says how the call departed and how it was answered.
	Note string
}

// Replayed is the outcome of a Replay beside the recorded one. Its Expect
// methods report a mismatch with t.Errorf, so one test shows every
// mismatch, and return the Replayed for chaining; the fields are there for
// checks of your own.
type Replayed struct {
	// Key is the capsule's invocation key.
	Key string
	// Err is the error the handler returned natively (nil on success; a
	// berth.ClassTimeout error for a timeout).
	Err error
	// Outcome is how the native run ended, as a capsule names it: Kind
	// "success", "failure" (Classes, Message, …) or "timeout".
	Outcome abi.CapsuleOutcome
	// Calls are the host calls the handler made, in order, with the answers
	// it was given.
	Calls []abi.CapsuleCall
	// Departures are the calls the recording had no answer for.
	Departures []Departure
	// Recorded is how the recorded attempt ended.
	Recorded abi.CapsuleOutcome

	t       TB
	aborted bool // Replay failed the test already; expectations are moot
}

func (r *Replayed) abort() *Replayed {
	r.aborted = true
	return r
}

// Reproduced reports whether the native outcome matches the recorded one:
// the same kind and, for a failure, the same class chain and message (of a
// berth.Panic, the message without its stack, which differs natively).
func (r *Replayed) Reproduced() bool {
	got, want := r.Outcome, r.Recorded
	if outcomeKind(got.Kind) != outcomeKind(want.Kind) {
		return false
	}
	if outcomeKind(got.Kind) != "failure" {
		return true
	}
	return slices.Equal(got.Classes, want.Classes) && failureText(got) == failureText(want)
}

func outcomeKind(k string) string {
	if k == "" {
		return "success"
	}
	return k
}

// failureText is a failure's message, a panic's without its stack.
func failureText(o abi.CapsuleOutcome) string {
	if len(o.Classes) > 0 && o.Classes[0] == berth.ClassPanic.Name() {
		msg, _, _ := strings.Cut(o.Message, "\n\n")
		return msg
	}
	return o.Message
}

// describe says how an outcome ended, for a report.
func describe(o abi.CapsuleOutcome) string {
	switch outcomeKind(o.Kind) {
	case "success":
		return "succeeded"
	case "failure":
		s := "failed"
		if len(o.Classes) > 0 {
			s += " with class " + strings.Join(o.Classes, " < ")
		}
		if o.FailureKind != "" {
			s += ", " + o.FailureKind
		}
		return s + ": " + failureText(o)
	default:
		return "ended as " + o.Kind + ": " + o.Message
	}
}

func (r *Replayed) errorf(t TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	for _, d := range r.Departures {
		msg += "\n\tdeparted at " + d.String()
	}
	t.Errorf("%s: %s", r.Key, msg)
}

// ExpectReproduced checks that the native run ended as the recorded
// attempt did (Reproduced).
func (r *Replayed) ExpectReproduced(t TB) *Replayed {
	t.Helper()
	if !r.aborted && !r.Reproduced() {
		r.errorf(t, "want the recorded outcome, it %s; but natively it %s", describe(r.Recorded), describe(r.Outcome))
	}
	return r
}

// ExpectSuccess checks that the handler succeeded natively: against a
// failure's capsule, that a fix handles the event.
func (r *Replayed) ExpectSuccess(t TB) *Replayed {
	t.Helper()
	if !r.aborted && outcomeKind(r.Outcome.Kind) != "success" {
		r.errorf(t, "want success, but natively it %s", describe(r.Outcome))
	}
	return r
}

// ExpectErrorIs checks that the handler failed natively with the class or
// one of its subclasses.
func (r *Replayed) ExpectErrorIs(t TB, class *berth.ErrorClass) *Replayed {
	t.Helper()
	if !r.aborted && !errors.Is(r.Err, class) && !slices.Contains(r.Outcome.Classes, class.Name()) {
		r.errorf(t, "want an error of class %s, but natively it %s", class.Name(), describe(r.Outcome))
	}
	return r
}

// ExpectNoDeparture checks that every host call the handler made had an
// answer in the recording.
func (r *Replayed) ExpectNoDeparture(t TB) *Replayed {
	t.Helper()
	if !r.aborted && len(r.Departures) > 0 {
		r.errorf(t, "want no departure from the recording, but %d calls departed", len(r.Departures))
	}
	return r
}
