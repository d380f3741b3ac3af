package tests

import (
	"github.com/berthhq/berth/internal/testing/checkfor"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestOperatorVerbs drives skip, pause and unpause over REST and a token
// change by reload: skip moves past the held-back events and the aggregate's
// later events are handled; a paused subscription handles nothing until it
// is unpaused; a token removed from the file stops working on the next
// request after the reload.
func TestOperatorVerbs(t *testing.T) {
	svc := newNotifier(t)
	cfg := hostConfig{NotifyURL: svc.URL(), Extra: fastRetry + authAndLimits}
	h := newHost(t, cfg)
	h.token = adminToken
	h.uploadNotifier(t, 201)

	// Skip through v2: v1 (parked) and v2 (held back) are never notified; v3 is.
	svc.set("ghost", behaviour{Unknown: true})
	h.appendShipped(t, "o-s", "ghost")
	h.waitParked(t, "o-s", 20*time.Second)
	h.appendShipped(t, "o-s", "ghost")
	svc.set("ghost", behaviour{})
	h.must(202, "POST", "/v1/subscriptions/"+subName+"/parked/Order/o-s/skip", map[string]any{"reason": "cancelled orders", "throughVersion": 2})
	checkfor.Within(t, 10*time.Second, func() error {
		return h.answers("/v1/subscriptions/"+subName+"/parked/Order/o-s", 404)
	})
	h.appendShipped(t, "o-s", "ghost")
	svc.waitNotified(t, key("o-s", 3), 20*time.Second)
	var keys []string
	for _, c := range svc.callsOf("ghost") {
		keys = append(keys, c.Key)
	}
	if !slices.Equal(keys, []string{key("o-s", 1), key("o-s", 3)}) {
		t.Errorf("ghost after skip through v2: calls %v, want the parked v1 then v3 only", keys)
	}
	// Skip again is safe: nothing is parked.
	if r := h.request("POST", "/v1/subscriptions/"+subName+"/parked/Order/o-s/skip", nil); r.Status != 404 {
		t.Errorf("skip of something no longer parked: %s, want 404", r)
	}

	// Pause: nothing is handled; unpause: it is. The order-summary
	// projection reads the same log unpaused: once it has counted o-p, the
	// host has read the commit and delivered it where nothing holds it back,
	// which is when the paused notifier would have delivered it too.
	wasm, err := orderSummaryWasm()
	if err != nil {
		t.Fatal(err)
	}
	h.must(201, "PUT", "/v1/modules/order-summary", wasm, "Content-Type", "application/wasm")
	var st subscriptionStatus
	h.must(200, "POST", "/v1/subscriptions/"+subName+"/pause", nil).JSON(t, &st)
	if st.State != "paused" {
		t.Errorf("after pause: state %q", st.State)
	}
	h.appendShipped(t, "o-p", "alice")
	h.waitSummaries(t, map[string]buyerSummary{"alice": {Shipped: 1}})
	if n := len(svc.callsOf("alice")); n != 0 {
		t.Errorf("a paused subscription notified alice %d times", n)
	}
	if st := h.subscription(t); st.Lag == 0 {
		t.Errorf("a paused subscription with an unhandled event shows lag 0: %+v", st)
	}
	svc.setEpoch(1) // a call arriving from now on came after the unpause was asked for
	h.must(200, "POST", "/v1/subscriptions/"+subName+"/unpause", nil)
	svc.waitNotified(t, key("o-p", 1), 20*time.Second)
	for _, c := range svc.callsOf("alice") {
		if c.Epoch != 1 {
			t.Errorf("alice was notified (%s) while the subscription was paused", c.Key)
		}
	}

	// Remove the deployer token from the file and reload: it stops working.
	without := strings.Replace(cfg.TOML(), "[[auth.tokens]]\nname = \"ci\"\nrole = \"deployer\"\ntoken = \""+deployerToken+"\"\n", "", 1)
	if without == cfg.TOML() {
		t.Fatal("the deployer token is not in the config")
	}
	d := *h
	d.t, d.token = t, deployerToken
	d.appendShipped(t, "o-t", "alice")
	writeFile(t, h.Config, without)
	h.must(200, "POST", "/v1/config/reload", nil)
	d.must(401, "POST", "/v1/events", map[string]any{"aggregateType": "Order", "aggregateId": "o-t",
		"events": []map[string]any{{"type": "OrderShipped"}}})
}

// TestCrashDuringResume kills the host while a resumed aggregate's event is
// being handled; the host started again finishes the resume: every held-back
// event is notified in order and the ledger record goes away.
func TestCrashDuringResume(t *testing.T) {
	svc := newNotifier(t)
	h := newHost(t, hostConfig{NotifyURL: svc.URL(), Extra: fastRetry})
	h.uploadNotifier(t, 201)
	svc.set("ghost", behaviour{Unknown: true})
	h.appendShipped(t, "o-r", "ghost")
	h.waitParked(t, "o-r", 20*time.Second)
	h.appendShipped(t, "o-r", "ghost")
	h.appendShipped(t, "o-r", "ghost")

	// The service holds v2's call unanswered: once it has arrived, the
	// resume is under way (v1 handled again, v2 in flight) and the kill
	// interrupts it.
	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) })
	svc.set("ghost", behaviour{HoldKey: key("o-r", 2), Hold: hold})
	h.must(202, "POST", "/v1/subscriptions/"+subName+"/parked/Order/o-r/resume", map[string]string{"reason": "fixed"})
	checkfor.Within(t, 10*time.Second, func() error { return arrivedAfter(svc, key("o-r", 2), 0) })
	if r := h.request("GET", "/v1/subscriptions/"+subName+"/parked/Order/o-r", nil); r.Status != 200 {
		t.Errorf("the resume finished with v2 unanswered (%d)", r.Status)
	}
	h.Kill()
	svc.setEpoch(1)
	svc.set("ghost", behaviour{})
	h2 := h.restart(t)
	svc.waitNotified(t, key("o-r", 3), 30*time.Second)
	checkfor.Within(t, 10*time.Second, func() error {
		return h2.answers("/v1/subscriptions/"+subName+"/parked/Order/o-r", 404)
	})
	prev := 0
	for _, c := range svc.callsOf("ghost") {
		if c.Epoch != 1 {
			continue
		}
		var v int
		switch c.Key {
		case key("o-r", 1):
			v = 1
		case key("o-r", 2):
			v = 2
		case key("o-r", 3):
			v = 3
		}
		if v < prev {
			t.Errorf("after the restart, version %d arrived after %d", v, prev)
		}
		prev = v
	}
	for v := 1; v <= 3; v++ {
		if svc.notified(key("o-r", v)) == 0 {
			t.Errorf("o-r v%d was never notified", v)
		}
	}
}

// TestOperatorWaitIsAKey: a resume that meets a long-horizon retry in
// flight waits server.operator-wait for it, then answers 409 busy and
// changes nothing; once the retry is done, the record's fate is the retry's.
func TestOperatorWaitIsAKey(t *testing.T) {
	svc := newNotifier(t)
	h := newHost(t, hostConfig{NotifyURL: svc.URL(), Extra: fastRetry + `
[server]
operator-wait = "400ms"

[subscription.parked]
first-delay = "100ms"
max-delay = "100ms"
`})
	h.uploadNotifier(t, 201)
	hold := make(chan struct{})
	released := false
	t.Cleanup(func() {
		if !released {
			close(hold)
		}
	})
	svc.set("ghost", behaviour{Fail: 1000}) // down: o-w spends its budget and parks, retrying
	h.appendShipped(t, "o-w", "ghost")
	h.waitParked(t, "o-w", 30*time.Second)
	// The next call for o-w (a long-horizon retry) is held unanswered.
	svc.set("ghost", behaviour{HoldKey: key("o-w", 1), Hold: hold})
	before := svc.arrived(key("o-w", 1))
	checkfor.Within(t, 20*time.Second, func() error { return arrivedAfter(svc, key("o-w", 1), before) })
	rec := h.must(200, "GET", parkedPath("o-w"), nil).Body

	start := time.Now()
	r := h.request("POST", parkedPath("o-w")+"/resume", map[string]string{"reason": "try"})
	took := time.Since(start)
	if r.Status != 409 || !strings.Contains(string(r.Body), "busy") {
		t.Fatalf("resume during a retry: %s; want 409 busy", r)
	}
	if took < 400*time.Millisecond || took > 10*time.Second {
		t.Errorf("the resume answered after %v; want server.operator-wait (400ms), not the old fixed 10s", took)
	}
	if got := h.must(200, "GET", parkedPath("o-w"), nil).Body; string(got) != string(rec) {
		t.Errorf("the refused resume changed the record:\nbefore %s\nafter  %s", rec, got)
	}
	// The retry answers: it succeeds, and the aggregate leaves the ledger.
	close(hold)
	released = true
	svc.waitNotified(t, key("o-w", 1), 20*time.Second)
	checkfor.Within(t, 20*time.Second, func() error { return h.answers(parkedPath("o-w"), 404) })
}

// TestPauseUntilThroughTheCLI: `berth subs pause --for` pauses a
// subscription until a time, which status shows and a restart keeps; at its
// end the subscription goes on by itself and the held event is delivered;
// the audit log has the reason and the end.
func TestPauseUntilThroughTheCLI(t *testing.T) {
	svc := newNotifier(t)
	h := newHost(t, hostConfig{NotifyURL: svc.URL(), Extra: fastRetry})
	h.uploadNotifier(t, 201)
	out := h.cli(t, "subs", "pause", subName, "--for", "4s", "--reason", "downstream deploy")
	if !strings.Contains(out, "paused subscription "+subName+" until") || !strings.Contains(out, "then it goes on by itself") {
		t.Fatalf("pause --for:\n%s", out)
	}
	h.appendShipped(t, "o-p", "alice")
	var st struct {
		State       string    `json:"state"`
		PausedUntil time.Time `json:"pausedUntil"`
	}
	h.must(200, "GET", "/v1/subscriptions/"+subName, nil).JSON(t, &st)
	if st.State != "paused" || st.PausedUntil.IsZero() {
		t.Fatalf("status while paused until: %+v", st)
	}
	h.Stop()
	h = h.restart(t)
	h.must(200, "GET", "/v1/subscriptions/"+subName, nil).JSON(t, &st)
	if time.Now().Before(st.PausedUntil) && (st.State != "paused" || st.PausedUntil.IsZero()) {
		t.Errorf("after a restart before its end: %+v", st)
	}
	svc.waitNotified(t, key("o-p", 1), 20*time.Second)
	h.must(200, "GET", "/v1/subscriptions/"+subName, nil).JSON(t, &st)
	if st.State != "running" {
		t.Errorf("after its end: %+v", st)
	}
	if audit := h.cli(t, "audit", "--wide"); !strings.Contains(audit, "downstream deploy") || !strings.Contains(audit, "until 20") {
		t.Errorf("the audit log does not have the pause's reason and end:\n%s", audit)
	}
	if r := h.request("POST", "/v1/subscriptions/"+subName+"/pause", []byte(`{"until": "2020-01-01T00:00:00Z"}`), "Content-Type", "application/json"); r.Status != 400 || !strings.Contains(string(r.Body), "until") {
		t.Errorf("pause until the past: %s", r)
	}
}
