package tests

import (
	"regexp"
	"testing"
	"time"
)

// TestOutageRefundsRevealingFailures: three orders of one partition fail in
// turn (the notification service answers 503); the third one's failure
// reveals an outage and pauses the partition. The attempts the first two
// were charged before that are refunded, so with a budget of two attempts
// they are not parked when their first attempt after the outage fails too:
// each still has its whole budget, and succeeds on the next.
func TestOutageRefundsRevealingFailures(t *testing.T) {
	svc := newNotifier(t)
	// One partition handling one order at a time: o-1 and o-2 fail and sit in
	// their backoff when o-3's failure reveals the outage; o-3 then probes,
	// and o-1 and o-2 meet the service's last 503 after the pause.
	h := newHost(t, hostConfig{NotifyURL: svc.URL(), Extra: `
[subscription]
partitions = 1
concurrency = 1

[subscriptions."ShipmentNotifier.onOrderShipped".retry]
max-attempts = 2
initial-backoff = "1s"
max-backoff = "1s"
`})
	h.uploadNotifier(t, 201)
	svc.set("f-1", behaviour{Fail: 2})
	svc.set("f-2", behaviour{Fail: 2})
	svc.set("f-3", behaviour{Fail: 1})
	h.appendShipped(t, "o-1", "f-1")
	h.appendShipped(t, "o-2", "f-2")
	h.appendShipped(t, "o-3", "f-3")

	eventually(t, 30*time.Second, "the three orders notified", func() bool {
		if recs := h.parked(t); len(recs) != 0 {
			t.Fatalf("parked %+v: the failures that revealed the outage were charged", recs)
		}
		return svc.notified(key("o-1", 1)) > 0 && svc.notified(key("o-2", 1)) > 0 && svc.notified(key("o-3", 1)) > 0
	})
	for _, b := range []string{"f-1", "f-2"} {
		if n := len(svc.callsOf(b)); n != 3 {
			t.Errorf("buyer %s called %d times, want 3 (two 503s, then the notification)", b, n)
		}
	}
	if recs := h.parked(t); len(recs) != 0 {
		t.Fatalf("parked %+v: the failures that revealed the outage were charged", recs)
	}
	if !regexp.MustCompile(`partition paused: systemic failure.*3 aggregates`).MatchString(h.Stderr()) {
		t.Errorf("the partition did not pause for the outage:\n%s", h.Stderr())
	}
}
