package tests

import (
	"encoding/json"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/natstest"
	"github.com/berthhq/berth/internal/testing/testbuild"
	"github.com/berthhq/berth/wasm/abi"
)

// fixedNotifierWasm is the notifier built with the fix a team might try for
// an unknown buyer: log it and pass it over (-tags skipunknown).
var fixedNotifierWasm = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "berth-fix-")
	if err != nil {
		return "", err
	}
	return testbuild.WasmTags(dir, "samples/shipment-notifier", "skipunknown")
})

// replayReport is what `berth parked replay --json` prints.
type replayReport struct {
	Module     abi.CapsuleModule  `json:"module"`
	Candidate  string             `json:"candidate"`
	Recorded   abi.CapsuleOutcome `json:"recorded"`
	Replayed   abi.CapsuleOutcome `json:"replayed"`
	Reproduced bool               `json:"reproduced"`
	Succeeded  bool               `json:"succeeded"`
	Calls      []abi.CapsuleCall  `json:"calls"`
	Departures []json.RawMessage  `json:"departures"`
}

// capsuleOf fetches the capsule of a parked aggregate and decodes it.
func (h *hostProc) capsuleOf(t *testing.T, sub, aggType, aggID string) (*abi.Capsule, []byte) {
	t.Helper()
	r := h.must(200, "GET", "/v1/subscriptions/"+sub+"/parked/"+aggType+"/"+aggID+"/capsule", nil)
	c, err := abi.DecodeCapsule(r.Body)
	if err != nil {
		t.Fatalf("capsule: %v\n%s", err, r.Body)
	}
	return c, r.Body
}

// replayJSON runs `berth parked replay … --json` against h and decodes
// its report; it returns the exit code too.
func replayJSON(t *testing.T, h *hostProc, args ...string) (replayReport, int) {
	t.Helper()
	out, errOut, code := berth(t, nil, append([]string{"parked", "replay", "--server", h.URL, "--json"}, args...)...)
	var rep replayReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("berth parked replay %v: exit %d, stdout %q, stderr %q", args, code, out, errOut)
	}
	return rep, code
}

// TestReplayUnknownBuyer is issue 23's story: the notifier parks for a
// buyer the service does not know; the capsule holds the event, the POST
// and its 404, with the bearer token redacted; `berth parked replay`
// reproduces the failure with no service running, twice alike; the fix
// that passes unknown buyers over, replayed with --module, succeeds with
// the one host call the recording answers.
func TestReplayUnknownBuyer(t *testing.T) {
	svc := newNotifier(t)
	const token = "s3cret-t0ken-for-the-test"
	h := newHost(t, hostConfig{NotifyURL: svc.URL(), NotifyToken: token, Extra: fastRetry})
	svc.set("carol", behaviour{Unknown: true})
	h.uploadNotifier(t, 201)
	h.appendShipped(t, "o-3", "carol")
	h.waitParked(t, "o-3", 20*time.Second)

	c, raw := h.capsuleOf(t, subName, "Order", "o-3")
	if strings.Contains(string(raw), token) {
		t.Errorf("the capsule holds the bearer token:\n%s", raw)
	}
	if c.Module.Name != moduleName || c.Module.Version != 1 || len(c.Module.SHA256) != 64 {
		t.Errorf("capsule module %+v", c.Module)
	}
	if c.Event.AggregateID != "o-3" || c.Event.OwnerID != "carol" || c.Event.Type != "OrderShipped" ||
		c.Event.InvocationKey != key("o-3", 1) || c.Event.Attempt != 1 || string(c.Event.Payload) != `{"carrier":"DHL"}` {
		t.Errorf("capsule event %+v", c.Event)
	}
	var post *abi.CapsuleCall
	for i := range c.Calls {
		if c.Calls[i].Fn == abi.CallHTTP {
			post = &c.Calls[i]
		}
	}
	if post == nil || post.HTTP.Method != "POST" || !strings.HasSuffix(post.HTTP.URL, "/buyers/carol/notifications") ||
		post.HTTP.Response == nil || post.HTTP.Response.Status != 404 {
		t.Fatalf("capsule calls %+v: want the POST and its 404", c.Calls)
	}
	if i := slices.IndexFunc(post.HTTP.Headers, func(h abi.Header) bool { return h.Name == "Authorization" }); i < 0 ||
		post.HTTP.Headers[i].Value != "[redacted]" {
		t.Errorf("POST headers %+v: want Authorization redacted", post.HTTP.Headers)
	}
	if !slices.Equal(c.Outcome.Classes, []string{"UnknownBuyer", "Notification"}) ||
		c.Outcome.Message != "the notification service does not know buyer carol" {
		t.Errorf("capsule outcome %+v", c.Outcome)
	}

	if out, _, _ := berth(t, nil, "parked", "show", "--server", h.URL, subName, "Order", "o-3"); !strings.Contains(out,
		"the failed attempt was recorded: berth parked replay "+subName+" Order o-3") {
		t.Errorf("parked show does not point at the capsule:\n%s", out)
	}

	// No service: the replay answers from the recording.
	svc.srv.Close()
	out, errOut, code := berth(t, nil, "parked", "replay", "--server", h.URL, subName, "Order", "o-3")
	if code != 0 || !strings.Contains(out, "reproduced: UnknownBuyer: the notification service does not know buyer carol") {
		t.Fatalf("replay: exit %d\n%s\n%s", code, out, errOut)
	}
	first, code1 := replayJSON(t, h, subName, "Order", "o-3")
	second, code2 := replayJSON(t, h, subName, "Order", "o-3")
	if code1 != 0 || code2 != 0 || !first.Reproduced || len(first.Departures) != 0 {
		t.Errorf("replay --json: exit %d, %+v", code1, first)
	}
	a, _ := json.Marshal(first.Calls)
	b, _ := json.Marshal(second.Calls)
	if string(a) != string(b) || first.Replayed.Message != second.Replayed.Message {
		t.Errorf("two replays differ:\n%s\n%s", a, b)
	}

	// The candidate fix, against the same inputs.
	fix, err := fixedNotifierWasm()
	if err != nil {
		t.Fatal(err)
	}
	rep, code := replayJSON(t, h, "--module", fix, subName, "Order", "o-3")
	https := slices.DeleteFunc(slices.Clone(rep.Calls), func(c abi.CapsuleCall) bool { return c.Fn != abi.CallHTTP })
	if code != 0 || !rep.Succeeded || rep.Replayed.Kind != "success" || len(rep.Departures) != 0 || len(https) != 1 ||
		https[0].HTTP.Response == nil || https[0].HTTP.Response.Status != 404 {
		t.Errorf("replay of the fix: exit %d, %+v", code, rep)
	}
	out, _, _ = berth(t, nil, "parked", "replay", "--server", h.URL, "--module", fix, subName, "Order", "o-3")
	if !strings.Contains(out, "the candidate handles this event") || !strings.Contains(out, "http POST") {
		t.Errorf("replay of the fix says:\n%s", out)
	}

	// Mistakes say what is wrong: no such parked aggregate (4), a candidate
	// that is not a module (1), a file and names both (2).
	notWasmFile := filepath.Join(t.TempDir(), "fix.wasm")
	writeFile(t, notWasmFile, "not a module")
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{subName, "Order", "o-404"}, 4, "o-404"},
		{[]string{"--module", notWasmFile, subName, "Order", "o-3"}, 1, "does not load"},
		{[]string{"--capsule", notWasmFile, subName, "Order", "o-3"}, 2, "leave SUB TYPE ID out"},
	} {
		_, errOut, code := berth(t, nil, append([]string{"parked", "replay", "--server", h.URL}, c.args...)...)
		if code != c.code || !strings.Contains(errOut, c.says) {
			t.Errorf("replay %v: exit %d, stderr %q; want %d saying %q", c.args, code, errOut, c.code, c.says)
		}
	}

	// Saved, the capsule replays from the file.
	saved := filepath.Join(t.TempDir(), "capsule.json")
	if _, errOut, code := berth(t, nil, "parked", "replay", "--server", h.URL, "--save", saved, subName, "Order", "o-3"); code != 0 {
		t.Fatalf("replay --save: exit %d: %s", code, errOut)
	}
	if out, errOut, code := berth(t, nil, "parked", "replay", "--server", h.URL, "--capsule", saved); code != 0 || !strings.Contains(out, "reproduced") {
		t.Errorf("replay --capsule: exit %d\n%s\n%s", code, out, errOut)
	}
}

// TestReplayTimeout: a handler that sleeps past its deadline parks; its
// capsule replays as a timeout.
func TestReplayTimeout(t *testing.T) {
	h := newHost(t, hostConfig{})
	h.uploadMisbehaving(t)
	h.appendEvent(t, "Nap", "n-1", "SleepImpatiently")
	const sub = "Misbehaving.impatientSleeper"
	checkfor.Within(t, 20*time.Second, func() error { return h.answers("/v1/subscriptions/"+sub+"/parked/Nap/n-1/capsule", 200) })
	c, _ := h.capsuleOf(t, sub, "Nap", "n-1")
	if c.Outcome.Kind != "timeout" {
		t.Fatalf("capsule outcome %+v, want a timeout", c.Outcome)
	}
	rep, code := replayJSON(t, h, sub, "Nap", "n-1")
	if code != 0 || !rep.Reproduced || rep.Replayed.Kind != "timeout" {
		t.Errorf("replay of a timeout: exit %d, %+v", code, rep)
	}
}

// TestReplayClockAndRandom: a guest that reads the clock and random bytes
// (and fails with what it read) replays identically, twice.
func TestReplayClockAndRandom(t *testing.T) {
	h := newHost(t, hostConfig{Extra: `
[subscriptions."Misbehaving.clockRandom".retry]
max-attempts = 1
`})
	h.uploadMisbehaving(t)
	h.appendEvent(t, "Dice", "d-1", "ClockRandom")
	const sub = "Misbehaving.clockRandom"
	checkfor.Within(t, 20*time.Second, func() error { return h.answers("/v1/subscriptions/"+sub+"/parked/Dice/d-1/capsule", 200) })
	c, _ := h.capsuleOf(t, sub, "Dice", "d-1")
	if len(c.Random) == 0 || len(c.Clock.Walltime) == 0 {
		t.Errorf("capsule: %d random bytes, %d wall clock readings", len(c.Random), len(c.Clock.Walltime))
	}
	first, code1 := replayJSON(t, h, sub, "Dice", "d-1")
	second, code2 := replayJSON(t, h, sub, "Dice", "d-1")
	if code1 != 0 || code2 != 0 || !first.Reproduced || first.Replayed.Message != c.Outcome.Message ||
		second.Replayed.Message != c.Outcome.Message {
		t.Errorf("replays: exit %d %d; recorded %q, replayed %q and %q", code1, code2, c.Outcome.Message, first.Replayed.Message, second.Replayed.Message)
	}
}

// TestReplayAcrossHosts: on a shared JetStream deployment the capsule one
// host recorded is read, and replayed, through every host.
func TestReplayAcrossHosts(t *testing.T) {
	srv := natstest.RunServer(t)
	svc := newNotifier(t)
	svc.set("carol", behaviour{Unknown: true})
	a := newHost(t, hostConfig{NotifyURL: svc.URL(), Extra: jetStreamConfig(srv.URL(), "REPLAY", "a")})
	b := newHost(t, hostConfig{NotifyURL: svc.URL(), Extra: jetStreamConfig(srv.URL(), "REPLAY", "b")})
	a.uploadNotifier(t, 201)
	checkfor.Within(t, 10*time.Second, func() error { return b.answers("/v1/modules/"+moduleName, 200) })
	a.appendShipped(t, "o-3", "carol")
	for _, h := range []*hostProc{a, b} {
		checkfor.Within(t, 20*time.Second, func() error {
			return h.answers("/v1/subscriptions/"+subName+"/parked/Order/o-3/capsule", 200)
		})
	}
	if c, _ := a.capsuleOf(t, subName, "Order", "o-3"); c.Host != "a" && c.Host != "b" {
		t.Errorf("the capsule names host %q, want the one that ran the attempt (a or b)", c.Host)
	}
	svc.srv.Close() // recorded once: the replays need no service
	for _, h := range []*hostProc{a, b} {
		rep, code := replayJSON(t, h, subName, "Order", "o-3")
		if code != 0 || !rep.Reproduced || !slices.Equal(rep.Replayed.Classes, []string{"UnknownBuyer", "Notification"}) {
			t.Errorf("replay through %s: exit %d, %+v", h.URL, code, rep)
		}
	}
}
