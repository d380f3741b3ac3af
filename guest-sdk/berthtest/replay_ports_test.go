package berthtest_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/berthhq/berth/guest-sdk/berth"
	"github.com/berthhq/berth/guest-sdk/berthtest"
	"github.com/berthhq/berth/wasm/abi"
)

func get(url string, status uint32, code string) abi.CapsuleCall {
	c := abi.CapsuleCall{Fn: abi.CallHTTP, HTTP: &abi.CapsuleHTTP{Method: "GET", URL: url}, Reply: &abi.CapsuleReply{Code: code}}
	if code == "ok" {
		c.HTTP.Response = &abi.CapsuleHTTPRes{Status: status}
	}
	return c
}

// capsuleOf is a capsule of an event of type T for the handler h, with the calls.
func capsuleOf(calls ...abi.CapsuleCall) *abi.Capsule {
	return &abi.Capsule{Format: abi.CapsuleFormat, Event: abi.CapsuleEvent{Handler: "h", InvocationKey: "P.h:A/1@1:0", Attempt: 1, Type: "T",
		AggregateType: "A", AggregateID: "1", Version: 1}, Calls: calls, Outcome: abi.CapsuleOutcome{Kind: "failure"}}
}

func processorOf(fn berth.HandlerFunc) *berth.Processor {
	return (&berth.Processor{Name: "P", Kind: berth.Projection}).On("h", "T", fn)
}

// TestReplayAnswersEveryPortFromTheRecording: each call gets the answer of
// its recorded request, the next unused one if it asks the same, else a
// later one (out of order), and the errors are those the module's ports
// give.
func TestReplayAnswersEveryPortFromTheRecording(t *testing.T) {
	c := capsuleOf(
		get("http://s/a", 500, "ok"),
		abi.CapsuleCall{Fn: abi.CallHTTP, HTTP: &abi.CapsuleHTTP{Method: "GET", URL: "http://s/b"}, Reply: &abi.CapsuleReply{Code: "refused", Message: "connection refused"}},
		get("http://s/a", 200, "ok"),
		get("http://s/a", 201, "ok"),
		abi.CapsuleCall{Fn: abi.CallKVGet, Key: "k", Reply: &abi.CapsuleReply{Code: "ok", Body: abi.Blob("v0")}},
		abi.CapsuleCall{Fn: abi.CallKVGet, Key: "gone", Reply: &abi.CapsuleReply{Code: "not_found"}},
		abi.CapsuleCall{Fn: abi.CallKVPut, Key: "k", Value: abi.Blob("v1"), Reply: &abi.CapsuleReply{Code: "backpressure", Message: "busy", RetryAfterMillis: 1500}},
		abi.CapsuleCall{Fn: abi.CallKVDelete, Key: "k", Reply: &abi.CapsuleReply{Code: "not_found"}},
		abi.CapsuleCall{Fn: abi.CallCommand, Command: &abi.CapsuleCommand{AggregateType: "S", AggregateID: "9", Type: "Reserve"}, Reply: &abi.CapsuleReply{Code: "unsupported", Message: "no"}},
		abi.CapsuleCall{Fn: abi.CallConfig, Key: "url", Reply: &abi.CapsuleReply{Code: "ok", Body: abi.Blob("http://s")}},
		abi.CapsuleCall{Fn: abi.CallConfig, Key: "missing", Reply: &abi.CapsuleReply{Code: "not_found"}},
	)
	var got []string
	note := func(format string, args ...any) { got = append(got, fmt.Sprintf(format, args...)) }
	r := berthtest.ReplayCapsule(t, processorOf(func(c *berth.Context) error {
		_, err := c.HTTP.Do(&berth.Request{URL: "http://s/b"}) // out of order; no method is GET
		note("b: %v systemic=%v", err, errors.Is(err, berth.ClassConnectionRefused))
		for range 3 {
			resp, err := c.HTTP.Do(&berth.Request{Method: "GET", URL: "http://s/a"})
			note("a: %v %v", status(resp), err)
		}
		v, ok, err := c.KV.Get("k")
		note("get k: %s %v %v", v, ok, err)
		v, ok, err = c.KV.Get("gone")
		note("get gone: %s %v %v", v, ok, err)
		err = c.KV.Put("k", []byte("v1"))
		note("put: %v backpressure=%v", err, errors.Is(err, berth.ClassWaitTimeout))
		note("delete: %v", c.KV.Delete("k"))
		note("send: %v", c.Commands.Send(berth.Command{AggregateType: "S", AggregateID: "9", Type: "Reserve"}))
		u, ok := c.Config.Get("url")
		note("url: %s %v", u, ok)
		_, ok = c.Config.Get("missing")
		note("missing: %v", ok)
		_, ok = c.Config.Get("never-read")
		note("never-read: %v", ok)
		return nil
	}), c)
	want := []string{
		"b:  http://s/b: connection refused systemic=true",
		"a: 500 <nil>", "a: 200 <nil>", "a: 201 <nil>", // b was out of order: a's are next
		"get k: v0 true <nil>", "get gone:  false <nil>",
		"put: kv put k: busy backpressure=true", "delete: <nil>", "send: send command Reserve: no",
		"url: http://s true", "missing: false", "never-read: false",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the handler saw\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var departed []string
	for _, d := range r.Departures {
		departed = append(departed, d.String())
	}
	want = []string{"call #0 GET http://s/b: out of order: answered as recorded call #1",
		`call #11 config never-read: not recorded: answered error "not recorded in the capsule"`}
	if !slices.Equal(departed, want) || r.Departures[0].Recorded.HTTP.URL != "http://s/a" {
		t.Errorf("departures %q, want %q", departed, want)
	}
	if len(r.Calls) != 12 {
		t.Errorf("%d calls, want 12", len(r.Calls))
	}
}

func status(r *berth.Response) int {
	if r == nil {
		return 0
	}
	return r.Status
}

func TestReplayComparesAPanicWithoutItsStack(t *testing.T) {
	c := capsuleOf()
	c.Outcome = abi.CapsuleOutcome{Kind: "failure", Classes: berth.ClassPanic.Chain(), Message: "panic: boom\n\ngoroutine 1 [running]:\nmain.handler(…)"}
	berthtest.ReplayCapsule(t, processorOf(func(*berth.Context) error { panic("boom") }), c).ExpectReproduced(t)

	c.Outcome.Message = "panic: bang\n\n…"
	if r := berthtest.ReplayCapsule(t, processorOf(func(*berth.Context) error { panic("boom") }), c); r.Reproduced() {
		t.Errorf("another panic's message reproduces it")
	}
}

// A handler that does not return within the capsule's timeout is a
// timeout, and left running; the test goes on.
func TestReplayOfAHandlerThatNeverReturns(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	c := capsuleOf()
	c.Limits.TimeoutMillis = 20
	c.Outcome = abi.CapsuleOutcome{Kind: "timeout"}
	r := berthtest.ReplayCapsule(t, processorOf(func(c *berth.Context) error {
		<-release
		c.Log.Info("too late") // the replay is over: not in the test's log, not in Calls
		return nil
	}), c).ExpectReproduced(t).ExpectErrorIs(t, berth.ClassTimeout)
	if !strings.Contains(r.Err.Error(), "ran past the capsule's timeout of 20ms") {
		t.Errorf("error %v", r.Err)
	}
}

func TestReplayMistakesAreFatal(t *testing.T) {
	dir := t.TempDir()
	other := filepath.Join(dir, "other.json")
	if err := os.WriteFile(other, []byte(`{"format":"berth-capsule/9"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path, want string
		p          *berth.Processor
	}{
		{filepath.Join(dir, "missing.json"), "no such file", notifier(parksUnknownBuyers)},
		{other, `capsule format "berth-capsule/9"`, notifier(parksUnknownBuyers)},
		{unknownBuyerCapsule, `processor P has no handler "onOrderShipped"`, processorOf(func(*berth.Context) error { return nil })},
	} {
		rec := &recorder{}
		r := berthtest.Replay(rec, tc.p, tc.path).ExpectReproduced(rec).ExpectSuccess(rec)
		if len(rec.fatals) != 1 || !strings.Contains(rec.fatals[0], tc.want) || len(rec.errors) != 0 || len(r.Calls) != 0 {
			t.Errorf("%s: fatals %q, errors %q", tc.path, rec.fatals, rec.errors)
		}
	}
}

// A capsule the size cap truncated says so in the test's log: its replay
// departs where the recording ends.
func TestReplayOfATruncatedCapsuleSaysSo(t *testing.T) {
	c := capsuleOf()
	c.Truncated = []string{"calls after the 1000th"}
	rec := &recorder{}
	r := berthtest.ReplayCapsule(rec, processorOf(func(c *berth.Context) error {
		_, err := c.HTTP.Do(&berth.Request{URL: "http://s/1001"})
		return err
	}), c)
	if len(rec.logs) != 1 || !strings.Contains(rec.logs[0], "truncated: calls after the 1000th") || len(r.Departures) != 1 {
		t.Errorf("logs %q, departures %v", rec.logs, r.Departures)
	}
}
