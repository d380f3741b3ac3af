package tests

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// parkedOf reads the ShipmentNotifier's record of an order as REST shows it.
func (h *hostProc) parkedOf(t *testing.T, order string) (classRecord, string) {
	t.Helper()
	var rec classRecord
	r := h.must(200, "GET", "/v1/subscriptions/"+subName+"/parked/Order/"+order, nil)
	r.JSON(t, &rec)
	return rec, string(r.Body)
}

// cli runs `host <args>` against the host and returns its stdout.
func (h *hostProc) cli(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(hostBin, append([]string{"--server", h.URL}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("host %v: %v\n%s", args, err, stderr.String())
	}
	return stdout.String()
}

// An unrecoverable failure parks at once and waits for an operator
// (docs/failure-model.md, section 5). The shipment notifier's unknown buyer (404, UnknownBuyer) parks
// after 1 attempt and waits for an operator: no next retry, and its record,
// the CLI and a restart all say so. A spent budget keeps its schedule.
func TestUnknownBuyerWaitsForOperator(t *testing.T) {
	svc := newNotifier(t)
	h := newHost(t, hostConfig{NotifyURL: svc.URL(), Extra: `
[subscriptions."ShipmentNotifier.onOrderShipped".retry]
max-attempts = 2
initial-backoff = "100ms"
max-backoff = "400ms"
`})
	h.uploadNotifier(t, 201)
	svc.set("carol", behaviour{Unknown: true})
	svc.set("bob", behaviour{Fail: 100}) // down for good: spends its budget
	h.appendShipped(t, "o-1", "carol")
	h.appendShipped(t, "o-2", "bob")

	h.waitParked(t, "o-1", 20*time.Second)
	rec, raw := h.parkedOf(t, "o-1")
	if rec.Attempts != 1 || rec.State != "waiting" || rec.WaitReason != "unrecoverable" || rec.NextRetry != nil ||
		strings.Contains(raw, "nextRetry") || rec.Error.Class != "unrecoverable" {
		t.Errorf("o-1: %s; want waiting for an operator after 1 attempt, with no next retry", raw)
	}
	if !strings.Contains(raw, "awaiting operator: unrecoverable") {
		t.Errorf("o-1: the park's history does not say it awaits an operator: %s", raw)
	}
	show := h.cli(t, "parked", "show", subName, "Order", "o-1")
	if !strings.Contains(show, "waiting") || !strings.Contains(show, "none: the failure is unrecoverable") {
		t.Errorf("host parked show:\n%s\nwant state waiting and no next retry because the failure is unrecoverable", show)
	}

	h.waitParked(t, "o-2", 20*time.Second)
	bob, raw := h.parkedOf(t, "o-2")
	if bob.Attempts != 2 || bob.State != "retrying" || bob.NextRetry == nil || bob.WaitReason != "" {
		t.Errorf("o-2: %s; a spent budget keeps its long-horizon schedule", raw)
	}
	if st := h.subscription(t); st.Parked["waiting"] != 1 || st.Parked["retrying"] != 1 {
		t.Errorf("parked counts %v, want 1 waiting and 1 retrying", st.Parked)
	}

	// A restart schedules nothing for it: it still waits, and carol is not
	// asked again.
	h.Stop()
	h = h.restart(t)
	rec, raw = h.parkedOf(t, "o-1")
	if rec.State != "waiting" || rec.WaitReason != "unrecoverable" || rec.NextRetry != nil {
		t.Errorf("o-1 after a restart: %s", raw)
	}
	if n := len(svc.callsOf("carol")); n != 1 {
		t.Errorf("carol asked %d times, want 1", n)
	}
}

// subscription.parked.retry-unrecoverable = true opts unrecoverable parks in
// to the long-horizon retries: the unknown buyer's record is retrying, with
// a next retry at first-delay.
func TestRetryUnrecoverableOptIn(t *testing.T) {
	svc := newNotifier(t)
	h := newHost(t, hostConfig{NotifyURL: svc.URL(), Extra: `
[subscription.parked]
retry-unrecoverable = true
first-delay = "1h"
max-delay = "2h"
`})
	h.uploadNotifier(t, 201)
	svc.set("carol", behaviour{Unknown: true})
	before := time.Now()
	h.appendShipped(t, "o-1", "carol")
	h.waitParked(t, "o-1", 20*time.Second)
	rec, raw := h.parkedOf(t, "o-1")
	if rec.Attempts != 1 || rec.State != "retrying" || rec.NextRetry == nil || rec.WaitReason != "" || rec.Error.Class != "unrecoverable" {
		t.Fatalf("o-1: %s; want retrying after 1 unrecoverable attempt", raw)
	}
	if d := rec.NextRetry.Sub(before); d < time.Hour-time.Minute || d > time.Hour+time.Minute {
		t.Errorf("next retry %v after the append, want first-delay 1h", d)
	}
	var st struct {
		ParkedRetries struct {
			RetryUnrecoverable bool `json:"retryUnrecoverable"`
		} `json:"parkedRetries"`
	}
	h.must(200, "GET", "/v1/subscriptions/"+subName, nil).JSON(t, &st)
	if !st.ParkedRetries.RetryUnrecoverable {
		t.Error("GET /v1/subscriptions: parkedRetries.retryUnrecoverable is not true")
	}
}
