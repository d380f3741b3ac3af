package tests

import (
	"encoding/json"
	"fmt"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/webhook"
)

// TestOutageRefundsRevealingFailures: three orders of one partition fail in
// turn (the notification service answers 503); the third one's failure
// reveals an outage and pauses the partition. The attempts the first two
// were charged before that are refunded, so with a budget of two attempts
// they are not parked when their first attempt after the outage fails too:
// each still has its whole budget, and succeeds on the next. A webhook is
// told of the partition's pause and of its end.
func TestOutageRefundsRevealingFailures(t *testing.T) {
	var mu sync.Mutex
	var told []webhook.Payload
	hooks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p webhook.Payload
		if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		told = append(told, p)
		mu.Unlock()
	}))
	defer hooks.Close()
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
` + fmt.Sprintf(`
[[webhooks]]
name = "outages"
url = %q
events = ["partition-paused", "partition-resumed"]
`, hooks.URL)})
	h.uploadNotifier(t, 201)
	svc.set("f-1", behaviour{Fail: 2})
	svc.set("f-2", behaviour{Fail: 2})
	svc.set("f-3", behaviour{Fail: 1})
	h.appendShipped(t, "o-1", "f-1")
	h.appendShipped(t, "o-2", "f-2")
	h.appendShipped(t, "o-3", "f-3")

	checkfor.Within(t, 30*time.Second, func() error {
		if recs := h.parked(t); len(recs) != 0 {
			t.Fatalf("parked %+v: the failures that revealed the outage were charged", recs)
		}
		return notifiedAll(svc, key("o-1", 1), key("o-2", 1), key("o-3", 1))
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
	checkfor.Within(t, 10*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(told) < 2 {
			return fmt.Errorf("the outage's webhooks so far: %+v, want its pause and end", told)
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	if len(told) != 2 || told[0].Type != "partition-paused" || told[0].Partition == nil || *told[0].Partition != 0 ||
		!strings.Contains(told[0].Reason, "3 aggregates") || told[1].Type != "partition-resumed" || told[0].Subscription != subName {
		t.Errorf("webhooks %+v, want the partition's pause for 3 aggregates failing, then its end", told)
	}
}

// TestOutageResumesAParkItsFailuresRevealed: the first order spends its
// budget of three attempts on 503s and parks while it fails alone; the next
// two orders' 503s, within the systemic window, reveal the outage its
// failures were part of. The host takes the park back: it resumes the order
// itself ("berth: outage" in the record's history) with its attempts
// refunded, and once the service answers again the order's events are
// notified in order, with no operator and nothing left parked — though the
// order fails twice more after the outage, which a budget still spent
// would not have survived.
func TestOutageResumesAParkItsFailuresRevealed(t *testing.T) {
	svc := newNotifier(t)
	h := newHost(t, hostConfig{NotifyURL: svc.URL(), Extra: `
[subscription]
partitions = 1

[subscriptions."ShipmentNotifier.onOrderShipped".retry]
max-attempts = 3
initial-backoff = "200ms"
max-backoff = "1s"
`})
	h.uploadNotifier(t, 201)
	const down = 1 << 20 // 503s until the test says otherwise
	for _, b := range []string{"f-1", "f-2", "f-3", "f-4"} {
		svc.set(b, behaviour{Fail: down})
	}
	h.appendShipped(t, "o-1", "f-1")
	if rec := h.waitParked(t, "o-1", 10*time.Second); rec.Attempts != 3 || rec.State != "retrying" {
		t.Fatalf("o-1 parked %+v, want retrying after 3 attempts", rec)
	}
	h.appendShipped(t, "o-1", "f-1") // v2, held behind the park
	for _, o := range []string{"o-2", "o-3", "o-4"} {
		h.appendShipped(t, o, "f-"+o[2:])
	}

	var rec parkedRecord
	checkfor.Within(t, 10*time.Second, func() error {
		r := h.must(200, "GET", "/v1/subscriptions/"+subName+"/parked/Order/o-1", nil)
		r.JSON(t, &rec)
		if rec.State != "resuming" {
			return fmt.Errorf("o-1 not resumed by the host: %s", r.Body)
		}
		return nil
	})
	last := rec.History[len(rec.History)-1]
	if last.Action != "resumed" || last.Actor != "berth: outage" || !strings.Contains(last.Reason, "3 attempts refunded") {
		t.Fatalf("o-1's last history entry %+v, want resumed by the host for the outage, 3 attempts refunded", last)
	}
	// The host's log reaches the test through a pipe: wait for the line
	// rather than read it at once.
	checkfor.Within(t, 5*time.Second, func() error {
		if s := h.Stderr(); !regexp.MustCompile(`partition paused: systemic failure.*3 aggregates`).MatchString(s) {
			return fmt.Errorf("the log does not say the partition paused for the outage: %q", s)
		}
		return nil
	})

	// The service is back; o-1's buyer fails twice more.
	svc.set("f-1", behaviour{Fail: 2})
	for _, b := range []string{"f-2", "f-3", "f-4"} {
		svc.set(b, behaviour{})
	}
	checkfor.Within(t, 30*time.Second, func() error {
		for _, r := range h.parked(t) {
			if r.State != "resuming" {
				t.Fatalf("o-1 parked again %+v: its budget was not refunded", r)
			}
		}
		return notifiedAll(svc, key("o-1", 1), key("o-1", 2), key("o-2", 1), key("o-3", 1), key("o-4", 1))
	})
	var order []string
	for _, c := range svc.callsOf("f-1") {
		if c.Status < 300 {
			order = append(order, c.Key)
		}
	}
	if want := []string{key("o-1", 1), key("o-1", 2)}; !slices.Equal(order, want) {
		t.Errorf("o-1 notified %v, want %v", order, want)
	}
	checkfor.Within(t, 10*time.Second, func() error { return h.noneParked(t) })
}
