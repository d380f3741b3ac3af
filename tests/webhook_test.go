package tests

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/berthhq/berth/webhook"
)

// told says what a hook was told until it was told n things; nil then.
func told(events []string, n int) error {
	if len(events) < n {
		return fmt.Errorf("the hook told %v, want %d deliveries", events, n)
	}
	return nil
}

// TestWebhooks: a [[webhooks]] receiver is told when an aggregate parks
// and when an operator resumes it, pauses or unpauses its subscription; a
// second hook filtered to skips hears nothing of those (and is told of a
// skip). The first hook has two Standard Webhooks secrets (a key being
// rotated) and the deprecated raw secret: each real delivery verifies with
// the official Standard Webhooks library given either whsec_ secret,
// timestamp included, and with the deprecated Berth-Signature. A search by
// a misspelt class answers 400 naming the declared class, for a job's
// filter too.
func TestWebhooks(t *testing.T) {
	const secret = "s3cret"
	newKey := "whsec_" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("n"), 32))
	oldKey := "whsec_" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("o"), 24))
	var verifiers []*standardwebhooks.Webhook
	for _, k := range []string{newKey, oldKey} {
		v, err := standardwebhooks.NewWebhook(k)
		if err != nil {
			t.Fatal(err)
		}
		verifiers = append(verifiers, v)
	}
	type delivery struct {
		Hook  string
		Event string
		Body  webhook.Payload
	}
	var mu sync.Mutex
	var got []delivery
	var bad []string
	refuse := func(w http.ResponseWriter, err error) {
		mu.Lock()
		bad = append(bad, err.Error())
		mu.Unlock()
		http.Error(w, err.Error(), http.StatusUnauthorized)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := webhook.VerifyRequest(r, secret, time.Now(), 5*time.Minute)
		hook := r.URL.Path[1:]
		if hook == "all" && err != nil {
			refuse(w, err)
			return
		}
		if hook == "all" {
			for i, v := range verifiers {
				if err := v.Verify(body, r.Header); err != nil {
					refuse(w, fmt.Errorf("whsec_ secret %d: %w", i, err))
					return
				}
			}
		} else {
			body, _ = io.ReadAll(r.Body)
		}
		var p webhook.Payload
		if err := json.Unmarshal(body, &p); err != nil || r.Header.Get("webhook-id") != p.ID {
			http.Error(w, "a payload whose id is the webhook-id", http.StatusBadRequest)
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
secrets = [%q, %q]

[[webhooks]]
name = "skips"
url = %q
events = ["skipped"]
`, srv.URL+"/all", secret, newKey, oldKey, srv.URL+"/skips")})
	h.uploadNotifier(t, 201)
	h.appendShipped(t, "o-w1", "ghost")
	h.waitParked(t, "o-w1", 20*time.Second)
	events := func(hook string) []string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for _, d := range got {
			if d.Hook == hook {
				out = append(out, d.Hook+":"+d.Event+":"+d.Body.AggregateID)
			}
		}
		return out
	}
	checkfor.Within(t, 10*time.Second, func() error { return told(events("all"), 2) }) // its group opened, and it parked

	svc.set("ghost", behaviour{})
	h.must(http.StatusAccepted, "POST", "/v1/subscriptions/"+subName+"/parked/Order/o-w1/resume", map[string]string{"reason": "ghost known"})
	checkfor.Within(t, 10*time.Second, func() error { return told(events("all"), 3) })

	// Nothing else may come of o-w1. Once its replay is over (the record
	// gone), the engine has nothing more to say of it; and a hook delivers
	// the outbox in order, so once both hooks have been told of a later
	// notification (o-w2 parked and skipped) each has decided on every
	// notification of o-w1.
	checkfor.Within(t, 10*time.Second, func() error {
		return h.answers("/v1/subscriptions/"+subName+"/parked/Order/o-w1", http.StatusNotFound)
	})
	svc.set("ghost2", behaviour{Unknown: true})
	h.appendShipped(t, "o-w2", "ghost2")
	h.waitParked(t, "o-w2", 20*time.Second)
	h.must(http.StatusAccepted, "POST", "/v1/subscriptions/"+subName+"/parked/Order/o-w2/skip", map[string]string{"reason": "a later notification"})
	checkfor.Within(t, 10*time.Second, func() error {
		if all, skips := events("all"), events("skips"); !slices.Contains(all, "all:skipped:o-w2") || !slices.Contains(skips, "skips:skipped:o-w2") {
			return fmt.Errorf("the hooks told %v and %v, want both told of the skip of o-w2", all, skips)
		}
		return nil
	})

	sub := "/v1/subscriptions/" + subName
	h.must(http.StatusOK, "POST", sub+"/pause", map[string]string{"reason": "the database migrates"})
	h.must(http.StatusOK, "POST", sub+"/unpause", nil)
	checkfor.Within(t, 10*time.Second, func() error {
		if ev := events("all"); len(ev) < 8 {
			return fmt.Errorf("the hook told %v, want the pause and unpause too (8)", ev)
		}
		return nil
	})

	// o-w1's group emptied when it was resumed: o-w2 opens it again.
	want := []string{"all:group-opened:", "all:parked:o-w1", "all:resumed:o-w1", "all:group-opened:", "all:parked:o-w2",
		"all:skipped:o-w2", "all:subscription-paused:", "all:subscription-unpaused:"}
	if e := events("all"); !slices.Equal(e, want) {
		t.Errorf("webhook deliveries to all %v, want %v", e, want)
	}
	if e := events("skips"); !slices.Equal(e, []string{"skips:skipped:o-w2"}) {
		t.Errorf("webhook deliveries to skips %v, want the skip of o-w2 only", e)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bad) > 0 {
		t.Errorf("deliveries with a bad signature: %v", bad)
	}
	var all []delivery
	for _, d := range got {
		if d.Hook == "all" && d.Event != "group-opened" {
			all = append(all, d)
		}
	}
	if len(all) >= 2 {
		if p := all[0].Body; p.Subscription != subName || p.Version != 1 || p.Error == nil || len(p.Error.Classes) == 0 || p.Error.Classes[0] != "UnknownBuyer" {
			t.Errorf("parked payload %+v", p)
		}
		if p := all[1].Body; p.Reason != "ghost known" || p.Actor == "" {
			t.Errorf("resumed payload %+v: want the reason and the actor", p)
		}
	}
	if len(all) >= 5 {
		if p := all[4].Body; p.Reason != "the database migrates" || p.Actor == "" || p.Subscription != subName {
			t.Errorf("subscription-paused payload %+v: want the reason, the actor and the subscription", p)
		}
	}

	r := h.request("GET", "/v1/parked?class=UnknownBuyr", nil)
	if r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), `nearest declared: \"UnknownBuyer\"`) {
		t.Errorf("GET /v1/parked?class=UnknownBuyr: %s, want 400 naming UnknownBuyer", r)
	}
	r = h.request("POST", "/v1/jobs", []byte(`{"action":"resume","dryRun":true,"filter":{"class":"UnknownBuyr"}}`), "Content-Type", "application/json")
	if r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), `"filter.class"`) {
		t.Errorf("a job's dry run by a misspelt class: %s, want 400 naming filter.class", r)
	}
}
