package tests

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/ledger/webhook"
)

// TestWebhooks: a [[webhooks]] receiver is told, with a valid signature,
// when an aggregate parks and when an operator resumes it; a second hook
// filtered to skips hears nothing of either.
func TestWebhooks(t *testing.T) {
	const secret = "s3cret"
	type delivery struct {
		Hook  string
		Event string
		Body  webhook.Payload
	}
	var mu sync.Mutex
	var got []delivery
	var bad []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := webhook.VerifyRequest(r, secret, time.Now(), 5*time.Minute)
		hook := r.URL.Path[1:]
		if hook == "all" && err != nil {
			mu.Lock()
			bad = append(bad, err.Error())
			mu.Unlock()
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		if hook != "all" {
			body, _ = io.ReadAll(r.Body)
		}
		var p webhook.Payload
		if err := json.Unmarshal(body, &p); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		got = append(got, delivery{Hook: hook, Event: r.Header.Get("Berth-Event"), Body: p})
		mu.Unlock()
	}))
	defer srv.Close()

	svc := newNotifier(t)
	svc.set("ghost", behaviour{Unknown: true})
	h := newHost(t, hostConfig{NotifyURL: svc.URL(), Extra: fastRetry + fmt.Sprintf(`
[[webhooks]]
name = "all"
url = %q
secret = %q

[[webhooks]]
name = "skips"
url = %q
events = ["skipped"]
`, srv.URL+"/all", secret, srv.URL+"/skips")})
	h.uploadNotifier(t, 201)
	h.appendShipped(t, "o-w1", "ghost")
	h.waitParked(t, "o-w1", 20*time.Second)
	events := func() []string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for _, d := range got {
			out = append(out, d.Hook+":"+d.Event+":"+d.Body.AggregateID)
		}
		return out
	}
	eventually(t, 10*time.Second, "the parked webhook", func() bool { return len(events()) >= 1 })

	svc.set("ghost", behaviour{})
	h.must(http.StatusAccepted, "POST", "/v1/subscriptions/"+subName+"/parked/Order/o-w1/resume", map[string]string{"reason": "ghost known"})
	eventually(t, 10*time.Second, "the resumed webhook", func() bool { return len(events()) >= 2 })
	time.Sleep(1500 * time.Millisecond) // one more poll of the outbox: nothing else may come

	want := []string{"all:parked:o-w1", "all:resumed:o-w1"}
	if e := events(); len(e) != len(want) || e[0] != want[0] || e[1] != want[1] {
		t.Errorf("webhook deliveries %v, want %v", e, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bad) > 0 {
		t.Errorf("deliveries with a bad signature: %v", bad)
	}
	if len(got) == 2 {
		if p := got[0].Body; p.Subscription != subName || p.Version != 1 || p.Error == nil || len(p.Error.Classes) == 0 || p.Error.Classes[0] != "UnknownBuyer" {
			t.Errorf("parked payload %+v", p)
		}
		if p := got[1].Body; p.Reason != "ghost known" || p.Actor == "" {
			t.Errorf("resumed payload %+v: want the reason and the actor", p)
		}
	}
}
