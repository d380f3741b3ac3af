package tests

import (
	"github.com/berthhq/berth/internal/testing/checkfor"
	"slices"
	"testing"
	"time"
)

// fastRetry keeps the sample's budget (five attempts) but waits 100ms, not 1s,
// after the first failure, so that the tests run quickly.
const fastRetry = `
[subscriptions."ShipmentNotifier.onOrderShipped".retry]
initial-backoff = "100ms"
max-backoff = "400ms"
`

// TestSpecStory is the README's story of failures and retries (the rules
// are docs/failure-model.md's), on the built host: a flaky answer is
// retried with the same invocation key and succeeds; an unknown buyer parks
// its order at once while other orders go on; after the service is fixed,
// resume notifies it with the same key, then the event it held back, and
// the ledger record goes away.
func TestSpecStory(t *testing.T) {
	svc := newNotifier(t)
	h := newHost(t, hostConfig{NotifyURL: svc.URL(), Extra: fastRetry})

	// A reactor starts at the end of the log: an order shipped before the
	// upload is not notified.
	h.appendShipped(t, "o-0", "alice")
	info := h.uploadNotifier(t, 201)
	if info.Processor != "ShipmentNotifier" || info.Name != moduleName {
		t.Errorf("upload: processor %q name %q, want ShipmentNotifier %s", info.Processor, info.Name, moduleName)
	}
	if len(info.Handlers) != 1 || info.Handlers[0].Name != "onOrderShipped" || info.Handlers[0].Subscription != subName ||
		!slices.Contains(info.Handlers[0].EventTypes, "OrderShipped") {
		t.Errorf("upload: handlers %+v, want onOrderShipped on OrderShipped as %s", info.Handlers, subName)
	}
	if !slices.Equal(info.Subscriptions, []string{subName}) {
		t.Errorf("upload: subscriptions %v, want [%s]", info.Subscriptions, subName)
	}
	if st := h.subscription(t); st.Retry["max-attempts"].Value != float64(5) || st.Retry["initial-backoff"].Source != "override" {
		t.Errorf("effective retry: %+v; want max-attempts 5 from the processor and initial-backoff from the override", st.Retry)
	}

	svc.set("bob", behaviour{Fail: 1})                  // flaky: one 503
	svc.set("carol", behaviour{Unknown: true})          // the service does not know carol yet
	svc.set("dan", behaviour{Busy: 1, RetryAfter: "1"}) // busy once: 429, Retry-After: 1

	h.appendShipped(t, "o-1", "alice")
	h.appendShipped(t, "o-2", "bob")
	h.appendShipped(t, "o-3", "carol")
	h.appendShipped(t, "o-5", "dan")

	// The flaky answer is retried and succeeds, with the same key.
	svc.waitNotified(t, key("o-1", 1), 20*time.Second)
	svc.waitNotified(t, key("o-2", 1), 20*time.Second)
	bob := svc.callsOf("bob")
	if len(bob) != 2 || bob[0].Status != 503 || bob[1].Status >= 300 {
		t.Errorf("bob: calls %+v, want a 503 then a success", bob)
	}
	for _, c := range bob {
		if c.Key != "ShipmentNotifier.onOrderShipped:Order/o-2@1:0" {
			t.Errorf("bob: Idempotency-Key %q, want ShipmentNotifier.onOrderShipped:Order/o-2@1:0", c.Key)
		}
	}

	// Backpressure is retried after the Retry-After, with the same key.
	svc.waitNotified(t, key("o-5", 1), 20*time.Second)
	dan := svc.callsOf("dan")
	if len(dan) != 2 || dan[0].Status != 429 || dan[1].Key != dan[0].Key || dan[0].Key != key("o-5", 1) {
		t.Errorf("dan: calls %+v, want a 429 then a success with key %s", dan, key("o-5", 1))
	} else if wait := dan[1].At.Sub(dan[0].At); wait < 900*time.Millisecond {
		t.Errorf("dan: retried %v after a 429 with Retry-After: 1", wait)
	}

	// The unknown buyer parks at once: one attempt, classes nearest first.
	rec := h.waitParked(t, "o-3", 20*time.Second)
	if !slices.Equal(rec.Error.Classes, []string{"UnknownBuyer", "Notification"}) || rec.Attempts != 1 || rec.Version != 1 {
		t.Errorf("parked o-3: classes %v attempts %d version %d; want [UnknownBuyer Notification], 1, 1", rec.Error.Classes, rec.Attempts, rec.Version)
	}
	list := h.parked(t)
	if len(list) != 1 || list[0].AggregateID != "o-3" || list[0].Subscription != subName || list[0].Attempts != 1 ||
		!slices.Equal(list[0].Error.Classes, []string{"UnknownBuyer", "Notification"}) {
		t.Errorf("GET /v1/parked: %+v; want only o-3 with [UnknownBuyer Notification] after 1 attempt", list)
	}

	// Its later event waits; every other aggregate goes on.
	h.appendShipped(t, "o-3", "carol")
	h.appendShipped(t, "o-4", "alice")
	svc.waitNotified(t, key("o-4", 1), 20*time.Second)
	if st := h.subscription(t); st.Parked["retrying"]+st.Parked["waiting"] != 1 {
		t.Errorf("subscription parked counts %v, want one", st.Parked)
	}
	carol := svc.callsOf("carol")
	if len(carol) != 1 || carol[0].Key != key("o-3", 1) || carol[0].Status != 404 {
		t.Fatalf("carol before resume: %+v; want one 404 for %s", carol, key("o-3", 1))
	}

	// Fix the service, resume: the same key is asked again, then the held-back event.
	svc.set("carol", behaviour{})
	h.must(202, "POST", "/v1/subscriptions/"+subName+"/parked/Order/o-3/resume", map[string]string{"reason": "carol registered"})
	svc.waitNotified(t, key("o-3", 2), 20*time.Second)
	carol = svc.callsOf("carol")
	var keys []string
	for _, c := range carol {
		keys = append(keys, c.Key)
	}
	if !slices.Equal(keys, []string{key("o-3", 1), key("o-3", 1), key("o-3", 2)}) || carol[1].Status >= 300 {
		t.Errorf("carol after resume: keys %v (%+v); want the parked key again, then v2", keys, carol)
	}
	checkfor.Within(t, 10*time.Second, func() error {
		return h.answers("/v1/subscriptions/"+subName+"/parked/Order/o-3", 404)
	})
	if list := h.parked(t); len(list) != 0 {
		t.Errorf("GET /v1/parked after resume: %+v, want none", list)
	}
	// Each order was notified successfully exactly once.
	for _, k := range []string{key("o-1", 1), key("o-2", 1), key("o-3", 1), key("o-3", 2), key("o-4", 1), key("o-5", 1)} {
		if n := svc.notified(k); n != 1 {
			t.Errorf("%s notified %d times, want 1", k, n)
		}
	}
	if n := svc.notified(key("o-0", 1)); n != 0 {
		t.Errorf("o-0, shipped before the upload, was notified %d times", n)
	}
}
