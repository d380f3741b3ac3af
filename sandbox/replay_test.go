package sandbox

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/wasm/abi"
)

// recordFailure invokes ev on m and returns its capsule, through the
// encoding the ledger keeps, failing the test unless the call failed with
// wantKind.
func recordFailure(t *testing.T, m *Module, ev *abi.Event, timeout time.Duration, wantKind OutcomeKind) (*abi.Capsule, Outcome) {
	t.Helper()
	o := m.Invoke(context.Background(), ev, timeout)
	// On a loaded machine a short deadline can pass while the instance is
	// still being made: that call never started, so it has nothing to
	// record. Call again with twice the deadline each time (a replay runs
	// under whatever budget was recorded), for one that ran.
	for try := 1; try < 6 && o.Kind == wantKind && o.Capsule == nil; try++ {
		t.Logf("call %d did not start within %v (%s); calling again with %v", try, timeout, o.Error(), 2*timeout)
		timeout *= 2
		o = m.Invoke(context.Background(), ev, timeout)
	}
	if o.Kind != wantKind {
		t.Fatalf("outcome %v (%s), want %v", o.Kind, o.Error(), wantKind)
	}
	if o.Capsule == nil {
		t.Fatalf("a failed call has no capsule (%s)", o.Error())
	}
	b, err := abi.EncodeCapsule(o.Capsule)
	if err != nil {
		t.Fatal(err)
	}
	c, err := abi.DecodeCapsule(b)
	if err != nil {
		t.Fatal(err)
	}
	return c, o
}

func replayed(t *testing.T, m *Module, c *abi.Capsule) Replayed {
	t.Helper()
	r, err := m.Replay(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if r.Capsule == nil {
		t.Fatal("a replay has no capsule of its own")
	}
	return r
}

func TestCapsuleOfUnknownBuyerReplaysWithoutTheService(t *testing.T) {
	s := newSandbox(t, Config{})
	svc := &notificationService{status: http.StatusNotFound, header: http.Header{"Set-Cookie": {"id=set-cookie-secret"}}}
	srv := httptest.NewServer(svc)
	const token = "config-secret-token"
	m := load(t, s, "samples/shipment-notifier", ModuleConfig{
		AllowedHosts: []string{strings.TrimPrefix(srv.URL, "http://")},
		Config:       map[string]string{"notifications-url": srv.URL, "notifications-token": token},
	})

	// A success and a cancelled call carry no capsule.
	svc.status = http.StatusNoContent
	if o := m.Invoke(context.Background(), shipped("order-1", "buyer-1", 1), time.Second); o.Kind != Success || o.Capsule != nil {
		t.Fatalf("success: %v, capsule %v", o.Kind, o.Capsule != nil)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if o := m.Invoke(ctx, shipped("order-1", "buyer-1", 1), time.Second); o.Kind != Canceled || o.Capsule != nil {
		t.Fatalf("canceled: %v, capsule %v", o.Kind, o.Capsule != nil)
	}

	svc.status = http.StatusNotFound
	ev := shipped("order-404", "buyer-404", 3)
	c, _ := recordFailure(t, m, ev, 300*time.Millisecond, GuestFailure)
	srv.Close() // the replay has no service to reach

	if c.Module.Name != "samples/shipment-notifier" || c.Module.SHA256 != m.SHA256() {
		t.Errorf("module %+v", c.Module)
	}
	if c.Event.InvocationKey != ev.InvocationKey || c.Event.DeadlineUnixNano != ev.DeadlineUnixNano || string(c.Event.Payload) != string(ev.Payload) {
		t.Errorf("event %+v, want %+v", c.Event, ev)
	}
	if c.Limits.TimeoutMillis != 300 || c.Limits.MemoryLimitPages != DefaultMemoryLimitPages || len(c.Limits.AllowedHosts) != 1 {
		t.Errorf("limits %+v", c.Limits)
	}
	fns := []string{}
	for _, call := range c.Calls {
		fns = append(fns, call.Fn)
	}
	if !slices.Equal(fns, []string{abi.CallConfig, abi.CallConfig, abi.CallHTTP}) {
		t.Fatalf("calls %v, want config (url), config (token), http", fns)
	}
	// The token is a secret config value: neither its reply nor the
	// Authorization header it went into keep it.
	if b, _ := abi.EncodeCapsule(c); strings.Contains(string(b), token) || !slices.Equal(c.RedactedConfig, []string{"notifications-token"}) ||
		string(c.Calls[1].Reply.Body) != Redacted || !slices.Equal(c.RedactedHeaders, []string{"Authorization", "Set-Cookie"}) {
		t.Errorf("redacted config %q, headers %q:\n%s", c.RedactedConfig, c.RedactedHeaders, b)
	}
	post := c.Calls[2].HTTP
	if post == nil || post.Method != "POST" || !strings.HasSuffix(post.URL, "/buyers/buyer-404/notifications") ||
		post.Response == nil || post.Response.Status != 404 || c.Calls[2].Reply.Code != "ok" {
		t.Fatalf("http call %+v", c.Calls[2])
	}
	want := "UnknownBuyer: the notification service does not know buyer buyer-404"
	if got := OutcomeText(c.Outcome); got != want {
		t.Fatalf("recorded outcome %q, want %q", got, want)
	}

	r := replayed(t, m, c)
	if !r.Reproduced(c.Outcome) || OutcomeText(r.Capsule.Outcome) != want || len(r.Departures) != 0 {
		t.Fatalf("replay: %q, departures %+v", OutcomeText(r.Capsule.Outcome), r.Departures)
	}
	if len(r.Capsule.Calls) != 3 || r.Capsule.Calls[2].HTTP.Response.Status != 404 {
		t.Fatalf("replay's calls %+v", r.Capsule.Calls)
	}

	// The fix (404: skip the buyer) succeeds on the same answers.
	fix := load(t, s, notifierFix, ModuleConfigOf(c))
	r = replayed(t, fix, c)
	if r.Outcome.Kind != Success || r.Reproduced(c.Outcome) || len(r.Departures) != 0 || r.Outcome.Capsule != nil {
		t.Fatalf("fix: %s, departures %+v", OutcomeText(r.Capsule.Outcome), r.Departures)
	}
	if n := len(r.Capsule.Calls); n != 4 || r.Capsule.Calls[3].Fn != abi.CallLog {
		t.Fatalf("fix's calls %+v, want config, config, http and its log line", r.Capsule.Calls)
	}
}

func TestReplayGivesTheRecordedClockAndRandom(t *testing.T) {
	s := newSandbox(t, Config{})
	m := load(t, s, "samples/misbehaving", ModuleConfig{})
	c, o := recordFailure(t, m, &abi.Event{Handler: "clockRandom", InvocationKey: "cr-1", Attempt: 1}, time.Second, GuestFailure)
	if len(c.Clock.Walltime) == 0 || len(c.Clock.Nanotime) == 0 || len(c.Random) < 16 {
		t.Fatalf("clock %+v, random %d bytes", c.Clock, len(c.Random))
	}
	first := replayed(t, m, c)
	second := replayed(t, m, c)
	for i, r := range []Replayed{first, second} {
		if r.Outcome.Failure.Message != o.Failure.Message || !r.Reproduced(c.Outcome) {
			t.Errorf("replay %d failed with %q, recorded %q", i+1, r.Outcome.Failure.Message, o.Failure.Message)
		}
		if !slices.Equal(r.Capsule.Clock.Walltime, c.Clock.Walltime) || string(r.Capsule.Random) != string(c.Random) {
			t.Errorf("replay %d gave clock %+v random %x, recorded %+v %x", i+1, r.Capsule.Clock, r.Capsule.Random, c.Clock, c.Random)
		}
	}
}

func TestReplayOfATimeoutInAHostCallTimesOut(t *testing.T) {
	addr := blackhole(t)
	s := newSandbox(t, Config{})
	m := load(t, s, "samples/misbehaving", ModuleConfig{
		AllowedHosts: []string{addr},
		Config:       map[string]string{"blackhole-url": "http://" + addr + "/"},
	})
	c, _ := recordFailure(t, m, &abi.Event{Handler: "hostCallBlocker", InvocationKey: "hb-1"}, 150*time.Millisecond, Timeout)
	if n := len(c.Calls); n != 2 || !c.Calls[1].Deadline || c.Calls[0].Deadline {
		t.Fatalf("calls %+v: want config, then the http call marked Deadline", c.Calls)
	}
	start := time.Now()
	r := replayed(t, m, c)
	if r.Outcome.Kind != Timeout || !r.Reproduced(c.Outcome) || len(r.Departures) != 0 {
		t.Fatalf("replay: %s, departures %+v", OutcomeText(r.Capsule.Outcome), r.Departures)
	}
	if want := fmt.Sprintf("timeout: the call ran past its %dms deadline", c.Limits.TimeoutMillis); OutcomeText(r.Capsule.Outcome) != want {
		t.Errorf("replay's outcome %q", OutcomeText(r.Capsule.Outcome))
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the replay took %v", d)
	}
}

// A guest that spins, sleeps or waits on a channel past its deadline does
// so again in a replay, under the recorded budget of real time.
func TestReplayOfASpinnerTimesOut(t *testing.T) {
	s := newSandbox(t, Config{})
	m := load(t, s, "samples/misbehaving", ModuleConfig{})
	for _, handler := range []string{"spinner", "sleeper", "channelWaiter"} {
		c, _ := recordFailure(t, m, &abi.Event{Handler: handler, InvocationKey: handler + "-1"}, 50*time.Millisecond, Timeout)
		for range 2 {
			start := time.Now()
			if r := replayed(t, m, c); r.Outcome.Kind != Timeout || !r.Reproduced(c.Outcome) {
				t.Fatalf("%s: replay: %s", handler, OutcomeText(r.Capsule.Outcome))
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("%s: the replay took %v", handler, d)
			}
		}
	}
}

// serviceAnswering starts a service that answers every request with status
// and body and a Set-Cookie header, and a misbehaving module pointed at it.
func serviceAnswering(t *testing.T, s *Sandbox, status int, body string) (*Module, *httptest.Server) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Set-Cookie", "id=set-cookie-secret")
		w.WriteHeader(status)
		w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	m := load(t, s, "samples/misbehaving", ModuleConfig{
		AllowedHosts: []string{strings.TrimPrefix(srv.URL, "http://")},
		Config:       map[string]string{"service-url": srv.URL},
	})
	return m, srv
}

func TestCapsuleRedactsCredentialHeaders(t *testing.T) {
	s := newSandbox(t, Config{})
	m, _ := serviceAnswering(t, s, http.StatusForbidden, "no")
	_, o := recordFailure(t, m, &abi.Event{Handler: "authorizedCall", InvocationKey: "auth-1"}, time.Second, GuestFailure)
	b, err := abi.EncodeCapsule(o.Capsule)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"secret-token", "secret-cookie", "set-cookie-secret"} {
		if strings.Contains(string(b), secret) {
			t.Errorf("the encoded capsule holds %q:\n%s", secret, b)
		}
	}
	if !strings.Contains(string(b), `"text/plain"`) || !strings.Contains(string(b), Redacted) {
		t.Errorf("the capsule lost the headers themselves:\n%s", b)
	}
	got := slices.Sorted(slices.Values(o.Capsule.RedactedHeaders))
	if !slices.Equal(got, []string{"Authorization", "Cookie", "Set-Cookie"}) {
		t.Errorf("redacted headers %v", got)
	}
}

func TestCapsuleSizeCapCutsAndSaysSo(t *testing.T) {
	const maxBytes = 8 << 10
	s := newSandbox(t, Config{CapsuleMaxBytes: maxBytes})
	m, _ := serviceAnswering(t, s, http.StatusInternalServerError, strings.Repeat("x", 64<<10))
	_, o := recordFailure(t, m, &abi.Event{Handler: "authorizedCall", InvocationKey: "big-1", Payload: []byte(strings.Repeat("p", 512))}, time.Second, GuestFailure)
	b, err := abi.EncodeCapsule(o.Capsule)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > maxBytes {
		t.Errorf("capsule of %d bytes, cap %d", len(b), maxBytes)
	}
	if len(o.Capsule.Truncated) == 0 || !strings.Contains(o.Capsule.Truncated[0], "bodies cut") {
		t.Errorf("truncated %q", o.Capsule.Truncated)
	}
	if res := o.Capsule.Calls[1].HTTP.Response; res == nil || len(res.Body) != capsuleBodyKeep {
		t.Errorf("response %+v", res)
	}
}

func TestReplayOfAnotherModuleListsDepartures(t *testing.T) {
	s := newSandbox(t, Config{})
	m, _ := serviceAnswering(t, s, http.StatusForbidden, "no")
	c, _ := recordFailure(t, m, &abi.Event{Handler: "authorizedCall", InvocationKey: "auth-2"}, time.Second, GuestFailure)
	variant := load(t, s, misbehavingV2, ModuleConfigOf(c))
	for range 2 {
		r := replayed(t, variant, c)
		if len(r.Departures) != 1 {
			t.Fatalf("departures %+v", r.Departures)
		}
		d := r.Departures[0]
		if d.Call != 1 || d.Made.HTTP == nil || !strings.HasSuffix(d.Made.HTTP.URL, "/v2") || d.Recorded == nil ||
			d.Recorded.HTTP == nil || strings.HasSuffix(d.Recorded.HTTP.URL, "/v2") || !strings.HasPrefix(d.Note, "not recorded") {
			t.Fatalf("departure %+v", d)
		}
		if r.Outcome.Kind != GuestFailure || !strings.Contains(r.Outcome.Failure.Message, ErrNotRecorded) || r.Reproduced(c.Outcome) {
			t.Fatalf("variant: %s", OutcomeText(r.Capsule.Outcome))
		}
	}
}
