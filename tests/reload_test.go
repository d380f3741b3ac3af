package tests

import (
	"fmt"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"mime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReloadOverride changes a subscription's max-attempts in berth.toml and
// reloads it, once with POST /v1/config/reload and once with SIGHUP, without
// a restart: the subscription shows the new value as an override, and the
// next failing aggregate parks after that many attempts. A bad file is
// refused with a problem naming the key and its line, and the running
// configuration stays.
func TestReloadOverride(t *testing.T) {
	svc := newNotifier(t)
	base := hostConfig{NotifyURL: svc.URL()}.TOML()
	withRetry := func(lines ...string) string {
		return base + "[subscriptions.\"ShipmentNotifier.onOrderShipped\".retry]\ninitial-backoff = \"50ms\"\nmax-backoff = \"100ms\"\n" +
			strings.Join(lines, "\n") + "\n"
	}
	h := newHost(t, hostConfig{})
	writeFile(t, h.Config, withRetry())
	h.must(200, "POST", "/v1/config/reload", nil)
	h.uploadNotifier(t, 201)

	maxAttempts := func() (float64, string) {
		ma := h.subscription(t).Retry["max-attempts"]
		v, _ := ma.Value.(float64)
		return v, ma.Source
	}
	if v, src := maxAttempts(); v != 5 || src != "processor" {
		t.Fatalf("max-attempts before the override: %v from %q, want 5 from processor", v, src)
	}
	// parksAfter appends an order for a buyer whose notifications always fail
	// and checks that it parks after want attempts, all seen by the service.
	parksAfter := func(order, buyer string, want int) {
		t.Helper()
		svc.set(buyer, behaviour{Fail: 1000})
		h.appendShipped(t, order, buyer)
		rec := h.waitParked(t, order, 20*time.Second)
		if rec.Attempts != want {
			t.Errorf("%s parked after %d attempts, want %d", order, rec.Attempts, want)
		}
		if calls := svc.callsOf(buyer); len(calls) != want {
			t.Errorf("%s: the service was called %d times, want %d", order, len(calls), want)
		}
	}

	// POST /v1/config/reload.
	writeFile(t, h.Config, withRetry("max-attempts = 2"))
	h.must(200, "POST", "/v1/config/reload", nil)
	if v, src := maxAttempts(); v != 2 || src != "override" {
		t.Fatalf("max-attempts after reload: %v from %q, want 2 from override", v, src)
	}
	parksAfter("r-1", "dave", 2)

	// SIGHUP.
	writeFile(t, h.Config, withRetry("max-attempts = 3"))
	h.Signal(syscall.SIGHUP)
	checkfor.Within(t, 10*time.Second, func() error {
		if v, src := maxAttempts(); v != 3 || src != "override" {
			return fmt.Errorf("max-attempts %v from %q after SIGHUP, want 3 from override", v, src)
		}
		return nil
	})
	parksAfter("r-2", "erin", 3)

	// A bad file is refused; the running configuration stays.
	bad := withRetry("max-atempts = 4")
	line := strings.Count(bad[:strings.Index(bad, "max-atempts")], "\n") + 1
	writeFile(t, h.Config, bad)
	r := h.must(400, "POST", "/v1/config/reload", nil)
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/problem+json" {
		t.Errorf("refused reload: Content-Type %q, want application/problem+json", r.Header.Get("Content-Type"))
	}
	var p problemDoc
	r.JSON(t, &p)
	if !strings.Contains(p.Detail, "max-atempts") || !strings.Contains(p.Detail, fmt.Sprintf("berth.toml:%d", line)) {
		t.Errorf("refused reload: detail %q should name max-atempts and berth.toml:%d", p.Detail, line)
	}
	h.Signal(syscall.SIGHUP)
	checkfor.Within(t, 10*time.Second, func() error { return reads("the host's log", h.Stderr(), "config reload refused") })
	if v, src := maxAttempts(); v != 3 || src != "override" {
		t.Errorf("max-attempts after a refused reload: %v from %q, want 3 from override", v, src)
	}
	parksAfter("r-3", "frank", 3)

	select {
	case <-h.done:
		t.Fatalf("the host exited: %v", h.waitErr)
	default:
	}
}

// problemDoc is an application/problem+json body.
type problemDoc struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	Field  string `json:"field"`
}

// TestReloadMidRetry lowers max-attempts while an aggregate is between two
// attempts: the new budget applies to its next attempt, so it parks then.
func TestReloadMidRetry(t *testing.T) {
	svc := newNotifier(t)
	retryBlock := func(maxAttempts int) string {
		return fmt.Sprintf("[subscriptions.\"ShipmentNotifier.onOrderShipped\".retry]\nmax-attempts = %d\ninitial-backoff = \"1500ms\"\nmax-backoff = \"1500ms\"\n", maxAttempts)
	}
	h := newHost(t, hostConfig{NotifyURL: svc.URL(), Extra: retryBlock(10)})
	h.uploadNotifier(t, 201)
	svc.set("dave", behaviour{Fail: 1000})
	h.appendShipped(t, "m-1", "dave")
	checkfor.Within(t, 20*time.Second, func() error { return svc.calledFor("dave", 1) })
	writeFile(t, h.Config, hostConfig{NotifyURL: svc.URL(), Extra: retryBlock(2)}.TOML())
	h.must(200, "POST", "/v1/config/reload", nil)
	if len(svc.callsOf("dave")) != 1 {
		t.Fatalf("the second attempt came before the reload; raise the backoff")
	}
	rec := h.waitParked(t, "m-1", 20*time.Second)
	if rec.Attempts != 2 || len(svc.callsOf("dave")) != 2 {
		t.Errorf("parked after %d attempts (%d calls), want 2: the reloaded max-attempts applies to the next attempt", rec.Attempts, len(svc.callsOf("dave")))
	}
}
