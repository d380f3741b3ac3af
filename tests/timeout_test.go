package tests

import (
	"encoding/json"
	"fmt"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/testbuild"
	"github.com/berthhq/berth/retry"
	"github.com/berthhq/berth/webhook"
)

var misbehavingWasm = sync.OnceValues(func() ([]byte, error) { return testbuild.Bytes("samples/misbehaving") })

// timeoutRecord is a parked record with what a timeout leaves in it.
type timeoutRecord struct {
	Error struct {
		Classes []string `json:"classes"`
		Kind    string   `json:"kind"`
		Message string   `json:"message"`
	} `json:"error"`
	Attempts int    `json:"attempts"`
	State    string `json:"state"`
	History  []struct {
		Action string `json:"action"`
		Error  *struct {
			Classes []string `json:"classes"`
			Kind    string   `json:"kind"`
		} `json:"error"`
	} `json:"history"`
}

// uploadMisbehaving deploys samples/misbehaving, whose sleeper (event
// "Sleep") sleeps for an hour, spinner ("Spin") spins forever,
// channelWaiter ("Wait") blocks on a channel and impatientSleeper
// ("SleepImpatiently") sleeps under a 300ms timeout it declares
// unrecoverable.
func (h *hostProc) uploadMisbehaving(t *testing.T) {
	t.Helper()
	wasm, err := misbehavingWasm()
	if err != nil {
		t.Fatal(err)
	}
	h.must(201, "PUT", "/v1/modules/misbehaving", wasm, "Content-Type", "application/wasm")
}

func (h *hostProc) appendEvent(t *testing.T, typ, id, event string) {
	t.Helper()
	h.must(201, "POST", "/v1/events", map[string]any{
		"aggregateType": typ, "aggregateId": id,
		"events": []map[string]any{{"type": event, "data": map[string]string{}}},
	})
}

func (h *hostProc) waitTimeoutRecord(t *testing.T, sub, typ, id string) timeoutRecord {
	t.Helper()
	var rec timeoutRecord
	checkfor.Within(t, 30*time.Second, func() error { return h.fetched(t, "/v1/subscriptions/"+sub+"/parked/"+typ+"/"+id, &rec) })
	return rec
}

// checkTimeout fails unless rec was parked by timeouts after attempts
// attempts, each recorded as berth.Timeout.
func checkTimeout(t *testing.T, what string, rec timeoutRecord, attempts int) {
	t.Helper()
	if !slices.Equal(rec.Error.Classes, []string{retry.ClassTimeout}) || rec.Error.Kind != "timeout" || rec.Attempts != attempts {
		t.Errorf("%s: record error %+v after %d attempts, want berth.Timeout after %d", what, rec.Error, rec.Attempts, attempts)
	}
	n := 0
	for _, e := range rec.History {
		if e.Action != "attempt" && e.Action != "parked" {
			continue
		}
		if e.Action == "attempt" {
			n++
		}
		if e.Error == nil || !slices.Equal(e.Error.Classes, []string{retry.ClassTimeout}) || e.Error.Kind != "timeout" {
			t.Errorf("%s: history entry %s with error %+v, want berth.Timeout", what, e.Action, e.Error)
		}
	}
	if n != attempts {
		t.Errorf("%s: %d attempts in the history, want %d", what, n, attempts)
	}
}

// TestSlowGuestTimesOut: a wasm guest that sleeps, spins or blocks past its
// attempt's timeout fails with class berth.Timeout — in the parked record,
// its attempt history, its long-horizon retry and the "parked" webhook —
// never berth.Canceled; it is retried within its budget, and an
// unrecoverable list naming berth.Timeout parks it on the first timeout.
func TestSlowGuestTimesOut(t *testing.T) {
	var mu sync.Mutex
	hooked := map[string][]string{} // aggregate id -> the parked webhook's error classes
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var p webhook.Payload
		if json.Unmarshal(body, &p) == nil && p.Type == "parked" && p.Error != nil {
			mu.Lock()
			hooked[p.AggregateID] = p.Error.Classes
			mu.Unlock()
		}
	}))
	defer srv.Close()

	h := newHost(t, hostConfig{Extra: fmt.Sprintf(`
[subscriptions."Misbehaving.sleeper".retry]
max-attempts = 2
initial-backoff = "10ms"
max-backoff = "10ms"
timeout = "300ms"

[subscriptions."Misbehaving.sleeper".parked]
max-retries = 1
first-delay = "100ms"
max-delay = "100ms"
timeout = "300ms"

[subscriptions."Misbehaving.spinner".retry]
max-attempts = 2
initial-backoff = "10ms"
max-backoff = "10ms"
timeout = "300ms"

[subscriptions."Misbehaving.channelWaiter".retry]
max-attempts = 5
timeout = "300ms"
unrecoverable = ["berth.Timeout"]

[[webhooks]]
name = "all"
url = %q
`, srv.URL)})
	h.uploadMisbehaving(t)
	h.appendEvent(t, "Slow", "sleep-1", "Sleep")
	h.appendEvent(t, "Slow", "spin-1", "Spin")
	h.appendEvent(t, "Slow", "wait-1", "Wait")
	h.appendEvent(t, "Slow", "impatient-1", "SleepImpatiently")

	checkTimeout(t, "sleeper", h.waitTimeoutRecord(t, "Misbehaving.sleeper", "Slow", "sleep-1"), 2)
	// The sleeper's one long-horizon retry times out too.
	var retried timeoutRecord
	checkfor.Within(t, 30*time.Second, func() error {
		r := h.must(200, "GET", "/v1/subscriptions/Misbehaving.sleeper/parked/Slow/sleep-1", nil)
		r.JSON(t, &retried)
		if retried.State != "waiting" {
			return fmt.Errorf("the sleeper before its long-horizon retry: %s", r.Body)
		}
		return nil
	})
	last := retried.History[len(retried.History)-1]
	for _, e := range retried.History {
		if e.Action == "retry" {
			last = e
		}
	}
	if retried.Attempts != 3 || !slices.Equal(retried.Error.Classes, []string{retry.ClassTimeout}) ||
		last.Action != "retry" || last.Error == nil || !slices.Equal(last.Error.Classes, []string{retry.ClassTimeout}) {
		t.Errorf("after its long-horizon retry: %+v", retried)
	}
	checkTimeout(t, "spinner", h.waitTimeoutRecord(t, "Misbehaving.spinner", "Slow", "spin-1"), 2)
	checkTimeout(t, "channelWaiter (unrecoverable berth.Timeout)", h.waitTimeoutRecord(t, "Misbehaving.channelWaiter", "Slow", "wait-1"), 1)
	// impatientSleeper's own retry settings (the module's) say berth.Timeout
	// is unrecoverable, with a 300ms timeout and five attempts.
	checkTimeout(t, "impatientSleeper (the module's own unrecoverable list)",
		h.waitTimeoutRecord(t, "Misbehaving.impatientSleeper", "Slow", "impatient-1"), 1)

	checkfor.Within(t, 20*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(hooked) != 4 {
			return fmt.Errorf("parked webhooks for %v, want 4", hooked)
		}
		return nil
	})
	mu.Lock()
	for id, classes := range hooked {
		if !slices.Equal(classes, []string{retry.ClassTimeout}) {
			t.Errorf("webhook for %s: classes %v, want [berth.Timeout]", id, classes)
		}
	}
	mu.Unlock()
}

// TestTimeoutClassifierRule: the documented way of tuning timeouts
// (docs/failure-model.md, "Timeouts and cancellation"), a classifier rule
// making berth.Timeout unrecoverable, parks a sleeping and a
// spinning guest on their first timeout, though their budget allows five.
func TestTimeoutClassifierRule(t *testing.T) {
	h := newHost(t, hostConfig{Extra: `
[subscription.retry]
max-attempts = 5
initial-backoff = "10ms"
max-backoff = "10ms"
timeout = "300ms"

[[classifier.rules]]
class = "berth.Timeout"
as = "unrecoverable"
`})
	h.uploadMisbehaving(t)
	h.appendEvent(t, "Slow", "sleep-1", "Sleep")
	h.appendEvent(t, "Slow", "spin-1", "Spin")
	checkTimeout(t, "sleeper", h.waitTimeoutRecord(t, "Misbehaving.sleeper", "Slow", "sleep-1"), 1)
	checkTimeout(t, "spinner", h.waitTimeoutRecord(t, "Misbehaving.spinner", "Slow", "spin-1"), 1)
}
