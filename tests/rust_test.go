package tests

import (
	"github.com/berthhq/berth/internal/testing/checkfor"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/testbuild"
)

// rustNotifierWasm is samples/shipment-notifier-rs, the ShipmentNotifier
// written with the Rust SDK, built once (by the tests that need it, so that
// the other tests do not wait for cargo).
var rustNotifierWasm = sync.OnceValues(func() ([]byte, error) {
	return testbuild.RustBytes("samples/shipment-notifier-rs")
})

// TestSpecStoryRust is the ShipmentNotifier story of docs/failure-model.md (TestSpecStory) told with the Rust
// module through the built binary: it is uploaded like the Go one and
// described the same; an order is notified, a flaky answer retried with the
// same invocation key and a busy one no sooner than its Retry-After; an
// unknown buyer parks its order at once, after one attempt, with the class
// chain nearest first, while its later event waits and other orders go on;
// after the fix, resume asks again with the same key, then the held-back
// event, and the ledger record goes away.
func TestSpecStoryRust(t *testing.T) {
	wasm, err := rustNotifierWasm()
	if err != nil {
		t.Fatal(err)
	}
	svc := newNotifier(t)
	h := newHost(t, hostConfig{NotifyURL: svc.URL(), Extra: fastRetry})

	h.appendShipped(t, "o-0", "alice") // before the upload: a reactor starts at the end
	var info moduleInfo
	h.must(201, "PUT", "/v1/modules/"+moduleName, wasm, "Content-Type", "application/wasm").JSON(t, &info)
	if info.Processor != "ShipmentNotifier" || info.Kind != "reactor" || len(info.Handlers) != 1 ||
		info.Handlers[0].Subscription != subName || !slices.Equal(info.Subscriptions, []string{subName}) {
		t.Fatalf("upload of the Rust module: %+v", info)
	}
	if st := h.subscription(t); st.Retry["max-attempts"].Value != float64(5) || st.Retry["timeout"].Value != "10s" {
		t.Errorf("effective retry %+v; want the Rust processor's 5 attempts and 10s", st.Retry)
	}

	svc.set("bob", behaviour{Fail: 1})
	svc.set("carol", behaviour{Unknown: true})
	svc.set("dan", behaviour{Busy: 1, RetryAfter: "1"})
	for _, o := range [][2]string{{"o-1", "alice"}, {"o-2", "bob"}, {"o-3", "carol"}, {"o-5", "dan"}} {
		h.appendShipped(t, o[0], o[1])
	}

	svc.waitNotified(t, key("o-1", 1), 20*time.Second)
	svc.waitNotified(t, key("o-2", 1), 20*time.Second)
	if bob := svc.callsOf("bob"); len(bob) != 2 || bob[0].Status != 503 || bob[1].Status >= 300 ||
		bob[0].Key != key("o-2", 1) || bob[1].Key != key("o-2", 1) {
		t.Errorf("bob: calls %+v, want a 503 then a success, both with key %s", bob, key("o-2", 1))
	}
	svc.waitNotified(t, key("o-5", 1), 20*time.Second)
	if dan := svc.callsOf("dan"); len(dan) != 2 || dan[0].Status != 429 || dan[1].Key != key("o-5", 1) {
		t.Errorf("dan: calls %+v, want a 429 then a success with key %s", dan, key("o-5", 1))
	} else if wait := dan[1].At.Sub(dan[0].At); wait < 900*time.Millisecond {
		t.Errorf("dan: retried %v after a 429 with Retry-After: 1", wait)
	}

	rec := h.waitParked(t, "o-3", 20*time.Second)
	if !slices.Equal(rec.Error.Classes, []string{"UnknownBuyer", "Notification"}) || rec.Attempts != 1 ||
		rec.State != "waiting" || rec.InvocationKey != key("o-3", 1) {
		t.Errorf("parked o-3: %+v; want [UnknownBuyer Notification] after 1 attempt, waiting, key %s", rec, key("o-3", 1))
	}
	h.appendShipped(t, "o-3", "carol")
	h.appendShipped(t, "o-4", "alice")
	svc.waitNotified(t, key("o-4", 1), 20*time.Second)
	if carol := svc.callsOf("carol"); len(carol) != 1 || carol[0].Status != 404 {
		t.Fatalf("carol before resume: %+v; want one 404", carol)
	}

	svc.set("carol", behaviour{})
	h.must(202, "POST", "/v1/subscriptions/"+subName+"/parked/Order/o-3/resume", map[string]string{"reason": "carol registered"})
	svc.waitNotified(t, key("o-3", 2), 20*time.Second)
	var keys []string
	for _, c := range svc.callsOf("carol") {
		keys = append(keys, c.Key)
	}
	if !slices.Equal(keys, []string{key("o-3", 1), key("o-3", 1), key("o-3", 2)}) {
		t.Errorf("carol after resume: keys %v; want the parked key again, then v2", keys)
	}
	checkfor.Within(t, 10*time.Second, func() error {
		return h.answers("/v1/subscriptions/"+subName+"/parked/Order/o-3", 404)
	})
	for _, k := range []string{key("o-1", 1), key("o-2", 1), key("o-3", 1), key("o-3", 2), key("o-4", 1), key("o-5", 1)} {
		if n := svc.notified(k); n != 1 {
			t.Errorf("%s notified %d times, want 1", k, n)
		}
	}
	if n := svc.notified(key("o-0", 1)); n != 0 {
		t.Errorf("o-0, shipped before the upload, was notified %d times", n)
	}
}
