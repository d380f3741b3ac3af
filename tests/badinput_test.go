package tests

import (
	"bytes"
	"fmt"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"mime"
	"strings"
	"testing"
	"time"
)

const (
	readerToken   = "reader-secret-1"
	deployerToken = "deployer-secret-1"
	adminToken    = "admin-secret-1"
)

// authAndLimits configures three tokens and small body limits.
const authAndLimits = `
[server]
max-body-size = "64KiB"
max-module-size = "8MiB"

[[auth.tokens]]
name = "dashboard"
role = "reader"
token = "` + readerToken + `"

[[auth.tokens]]
name = "ci"
role = "deployer"
token = "` + deployerToken + `"

[[auth.tokens]]
name = "root"
role = "admin"
token = "` + adminToken + `"
`

// TestBadInput sends bad requests to every endpoint: each is refused with a
// clear 4xx problem document, never a 5xx, and nothing stored changes.
func TestBadInput(t *testing.T) {
	svc := newNotifier(t)
	h := newHost(t, hostConfig{NotifyURL: svc.URL(), Extra: fastRetry + authAndLimits})
	h.token = adminToken
	uploaded := h.uploadNotifier(t, 201)
	h.appendShipped(t, "o-1", "alice")
	svc.set("ghost", behaviour{Unknown: true})
	h.appendShipped(t, "o-9", "ghost")
	svc.waitNotified(t, key("o-1", 1), 20*time.Second)
	h.waitParked(t, "o-9", 20*time.Second)

	// snapshot is what is stored: modules, two aggregates' events, the
	// ledger and the subscription's head, checkpoint and parked counts.
	snapshot := func() string {
		var b strings.Builder
		for _, p := range []string{"/v1/modules", "/v1/aggregates/Order/o-1/events", "/v1/aggregates/Order/o-9/events", "/v1/parked"} {
			b.Write(h.must(200, "GET", p, nil).Body)
			b.WriteByte('\n')
		}
		st := h.subscription(t)
		fmt.Fprintf(&b, "head %d checkpoint %d parked %v state %s", st.Head, st.Checkpoint, st.Parked, st.State)
		return b.String()
	}
	checkfor.Within(t, 10*time.Second, func() error { return caughtUp(h.subscription(t)) })
	want := snapshot()

	const (
		admin    = adminToken
		reader   = readerToken
		deployer = deployerToken
		none     = ""
		bogus    = "not-a-token"
		wasm     = "application/wasm"
		js       = "application/json"
	)
	huge := `{"aggregateType":"Order","aggregateId":"o-1","events":[{"type":"OrderShipped","data":{"pad":"` +
		strings.Repeat("x", 100<<10) + `"}}]}`
	bigModule := append(append([]byte{}, notifierWasm...), bytes.Repeat([]byte{0}, 9<<20)...)
	event := func(extra string) string {
		return `{"aggregateType":"Order","aggregateId":"o-1",` + extra + `"events":[{"type":"OrderShipped","data":{}}]}`
	}
	parked := "/v1/subscriptions/" + subName + "/parked/Order/o-9"
	notParked := "/v1/subscriptions/" + subName + "/parked/Order/o-1"

	cases := []struct {
		name        string
		token       string
		method      string
		path        string
		contentType string
		body        any
		want        int
	}{
		// POST /v1/events
		{"events: malformed JSON", admin, "POST", "/v1/events", js, `{"aggregateType":"Order",`, 400},
		{"events: not an object", admin, "POST", "/v1/events", js, `[1,2,3]`, 400},
		{"events: empty body", admin, "POST", "/v1/events", js, ``, 400},
		{"events: aggregateId a number", admin, "POST", "/v1/events", js, `{"aggregateType":"Order","aggregateId":7,"events":[{"type":"OrderShipped"}]}`, 400},
		{"events: expectedVersion a string", admin, "POST", "/v1/events", js, event(`"expectedVersion":"1",`), 400},
		{"events: events an object", admin, "POST", "/v1/events", js, `{"aggregateType":"Order","aggregateId":"o-1","events":{"type":"OrderShipped"}}`, 400},
		{"events: unknown field", admin, "POST", "/v1/events", js, event(`"aggregateVersion":1,`), 400},
		{"events: unknown field in an event", admin, "POST", "/v1/events", js, `{"aggregateType":"Order","aggregateId":"o-1","events":[{"type":"OrderShipped","payload":{}}]}`, 400},
		{"events: trailing data", admin, "POST", "/v1/events", js, event(``) + `{}`, 400},
		{"events: trailing ]", admin, "POST", "/v1/events", js, event(``) + `]`, 400},
		{"events: trailing }", admin, "POST", "/v1/events", js, event(``) + "\n}", 400},
		{"events: aggregateId ..", admin, "POST", "/v1/events", js, `{"aggregateType":"Order","aggregateId":"..","events":[{"type":"OrderShipped"}]}`, 400},
		{"events: aggregateType .", admin, "POST", "/v1/events", js, `{"aggregateType":".","aggregateId":"o-1","events":[{"type":"OrderShipped"}]}`, 400},
		{"events: no aggregateType", admin, "POST", "/v1/events", js, `{"aggregateId":"o-1","events":[{"type":"OrderShipped"}]}`, 400},
		{"events: no aggregateId", admin, "POST", "/v1/events", js, `{"aggregateType":"Order","events":[{"type":"OrderShipped"}]}`, 400},
		{"events: no events", admin, "POST", "/v1/events", js, `{"aggregateType":"Order","aggregateId":"o-1","events":[]}`, 400},
		{"events: event without type", admin, "POST", "/v1/events", js, `{"aggregateType":"Order","aggregateId":"o-1","events":[{"data":{}}]}`, 400},
		{"events: negative expectedVersion", admin, "POST", "/v1/events", js, event(`"expectedVersion":-1,`), 400},
		{"events: version conflict (new)", admin, "POST", "/v1/events", js, event(`"expectedVersion":0,`), 409},
		{"events: version conflict (ahead)", admin, "POST", "/v1/events", js, event(`"expectedVersion":5,`), 409},
		{"events: body above max-body-size", admin, "POST", "/v1/events", js, huge, 413},
		{"events: reader token", reader, "POST", "/v1/events", js, event(``), 403},
		{"events: no token", none, "POST", "/v1/events", js, event(``), 401},
		{"events: unknown token", bogus, "POST", "/v1/events", js, event(``), 401},

		// PUT/GET/DELETE /v1/modules
		{"modules: not wasm", admin, "PUT", "/v1/modules/" + moduleName, wasm, notWasm, 400},
		{"modules: wasm without the ABI", admin, "PUT", "/v1/modules/" + moduleName, wasm, noABIWasm, 400},
		{"modules: wrong ABI version", admin, "PUT", "/v1/modules/" + moduleName, wasm, wrongABIWasm, 400},
		{"modules: empty body", admin, "PUT", "/v1/modules/" + moduleName, wasm, []byte{}, 400},
		{"modules: JSON body", admin, "PUT", "/v1/modules/" + moduleName, js, `{"wasm":"AGFzbQ=="}`, 415},
		{"modules: above max-module-size", admin, "PUT", "/v1/modules/" + moduleName, wasm, bigModule, 413},
		{"modules: invalid name", admin, "PUT", "/v1/modules/bad.name!", wasm, notifierWasm, 400},
		{"modules: name too long", admin, "PUT", "/v1/modules/" + strings.Repeat("m", 65), wasm, notifierWasm, 400},
		{"modules: processor served by another module", admin, "PUT", "/v1/modules/notifier-copy", wasm, notifierWasm, 409},
		{"modules: reader token", reader, "PUT", "/v1/modules/" + moduleName, wasm, notifierWasm, 403},
		{"modules: no token", none, "PUT", "/v1/modules/" + moduleName, wasm, notifierWasm, 401},
		{"modules: unknown module", admin, "GET", "/v1/modules/nope", "", nil, 404},
		{"modules: delete unknown", admin, "DELETE", "/v1/modules/nope", "", nil, 404},
		{"modules: delete as reader", reader, "DELETE", "/v1/modules/" + moduleName, "", nil, 403},
		{"modules: list without token", none, "GET", "/v1/modules", "", nil, 401},

		// GET /v1/aggregates/{type}/{id}/events
		{"aggregates: unknown aggregate", admin, "GET", "/v1/aggregates/Order/nope/events", "", nil, 404},
		{"aggregates: unknown type", admin, "GET", "/v1/aggregates/Invoice/o-1/events", "", nil, 404},
		{"aggregates: from not a number", admin, "GET", "/v1/aggregates/Order/o-1/events?from=abc", "", nil, 400},
		{"aggregates: negative from", admin, "GET", "/v1/aggregates/Order/o-1/events?from=-1", "", nil, 400},
		{"aggregates: limit 0", admin, "GET", "/v1/aggregates/Order/o-1/events?limit=0", "", nil, 400},
		{"aggregates: limit too big", admin, "GET", "/v1/aggregates/Order/o-1/events?limit=100000", "", nil, 400},

		// /v1/subscriptions
		{"subscriptions: unknown", admin, "GET", "/v1/subscriptions/Nope.onNothing", "", nil, 404},
		{"subscriptions: pause unknown", admin, "POST", "/v1/subscriptions/Nope.onNothing/pause", "", nil, 404},
		{"subscriptions: unpause unknown", admin, "POST", "/v1/subscriptions/Nope.onNothing/unpause", "", nil, 404},
		{"subscriptions: reset unknown", admin, "POST", "/v1/subscriptions/Nope.onNothing/reset", js, `{"position":1}`, 404},
		{"subscriptions: reset malformed", admin, "POST", "/v1/subscriptions/" + subName + "/reset", js, `{"position":`, 400},
		{"subscriptions: reset without position", admin, "POST", "/v1/subscriptions/" + subName + "/reset", js, `{}`, 400},
		{"subscriptions: reset position a string", admin, "POST", "/v1/subscriptions/" + subName + "/reset", js, `{"position":"1"}`, 400},
		{"subscriptions: reset negative position", admin, "POST", "/v1/subscriptions/" + subName + "/reset", js, `{"position":-1}`, 400},
		{"subscriptions: reset beyond the head", admin, "POST", "/v1/subscriptions/" + subName + "/reset", js, `{"position":1000000}`, 400},
		{"subscriptions: reset unknown field", admin, "POST", "/v1/subscriptions/" + subName + "/reset", js, `{"position":1,"force":true}`, 400},
		{"subscriptions: reset huge body", admin, "POST", "/v1/subscriptions/" + subName + "/reset", js, huge, 413},
		{"subscriptions: pause as reader", reader, "POST", "/v1/subscriptions/" + subName + "/pause", "", nil, 403},
		{"subscriptions: reset as reader", reader, "POST", "/v1/subscriptions/" + subName + "/reset", js, `{"position":1}`, 403},
		{"subscriptions: pause without token", none, "POST", "/v1/subscriptions/" + subName + "/pause", "", nil, 401},

		// /v1/parked and resume/skip
		{"parked: bad state filter", admin, "GET", "/v1/parked?state=bogus", "", nil, 400},
		{"parked: limit 0", admin, "GET", "/v1/parked?limit=0", "", nil, 400},
		{"parked: limit not a number", admin, "GET", "/v1/parked?limit=ten", "", nil, 400},
		{"parked: record of an aggregate not parked", admin, "GET", notParked, "", nil, 404},
		{"parked: record of an unknown aggregate", admin, "GET", "/v1/subscriptions/" + subName + "/parked/Order/nope", "", nil, 404},
		{"parked: record of an unknown subscription", admin, "GET", "/v1/subscriptions/Nope.onNothing/parked/Order/o-9", "", nil, 404},
		{"resume: not parked", admin, "POST", notParked + "/resume", "", nil, 404},
		{"resume: unknown aggregate", admin, "POST", "/v1/subscriptions/" + subName + "/parked/Order/nope/resume", "", nil, 404},
		{"resume: unknown subscription", admin, "POST", "/v1/subscriptions/Nope.onNothing/parked/Order/o-9/resume", "", nil, 404},
		{"skip: not parked", admin, "POST", notParked + "/skip", "", nil, 404},
		{"skip: unknown subscription", admin, "POST", "/v1/subscriptions/Nope.onNothing/parked/Order/o-9/skip", "", nil, 404},
		{"resume: malformed body", admin, "POST", parked + "/resume", js, `{"reason":`, 400},
		{"resume: reason a number", admin, "POST", parked + "/resume", js, `{"reason":42}`, 400},
		{"resume: unknown field", admin, "POST", parked + "/resume", js, `{"reason":"x","force":true}`, 400},
		{"resume: throughVersion", admin, "POST", parked + "/resume", js, `{"throughVersion":1}`, 400},
		{"resume: trailing ]", admin, "POST", parked + "/resume", js, `{"reason":"x"}]`, 400},
		{"resume: trailing }", admin, "POST", parked + "/resume", js, `{"reason":"x"} }`, 400},
		{"skip: trailing ]", admin, "POST", parked + "/skip", js, `{"reason":"x"}]`, 400},
		{"skip: two objects", admin, "POST", parked + "/skip", js, `{"reason":"x"}{"reason":"y"}`, 400},
		{"reset: trailing ]", admin, "POST", "/v1/subscriptions/" + subName + "/reset", js, `{"position":1}]`, 400},
		{"resume: huge body", admin, "POST", parked + "/resume", js, `{"reason":"` + strings.Repeat("r", 100<<10) + `"}`, 413},
		{"skip: malformed body", admin, "POST", parked + "/skip", js, `not json`, 400},
		{"skip: throughVersion a string", admin, "POST", parked + "/skip", js, `{"throughVersion":"2"}`, 400},
		{"skip: negative throughVersion", admin, "POST", parked + "/skip", js, `{"throughVersion":-2}`, 400},
		{"skip: throughVersion beyond the head", admin, "POST", parked + "/skip", js, `{"throughVersion":99}`, 400},
		{"resume: reader token", reader, "POST", parked + "/resume", js, `{"reason":"x"}`, 403},
		{"skip: reader token", reader, "POST", parked + "/skip", "", nil, 403},
		{"resume: no token", none, "POST", parked + "/resume", "", nil, 401},

		// config, metrics, unknown routes
		{"reload: reader token", reader, "POST", "/v1/config/reload", "", nil, 403},
		{"reload: deployer token", deployer, "POST", "/v1/config/reload", "", nil, 403},
		{"reload: no token", none, "POST", "/v1/config/reload", "", nil, 401},
		{"metrics: no token", none, "GET", "/metrics", "", nil, 401},
		{"unknown route", admin, "GET", "/v1/nothing", "", nil, 404},
		{"console: invalid UTF-8", none, "GET", "/console/%ff", "", nil, 404},
		{"console: invalid UTF-8 in a file name", none, "GET", "/console/console%ff.js", "", nil, 404},
		{"console: no such file", none, "GET", "/console/nope.js", "", nil, 404},
		{"method not allowed", admin, "DELETE", "/v1/events", "", nil, 405},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := *h
			c.t, c.token = t, tc.token
			var hdr []string
			if tc.contentType != "" {
				hdr = []string{"Content-Type", tc.contentType}
			}
			r := c.request(tc.method, tc.path, tc.body, hdr...)
			if r.Status >= 500 {
				t.Fatalf("%s %s: a server error: %s", tc.method, tc.path, r)
			}
			if r.Status != tc.want {
				t.Errorf("%s %s: want %d, got %s", tc.method, tc.path, tc.want, r)
			}
			if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/problem+json" {
				t.Errorf("%s %s: Content-Type %q, want application/problem+json", tc.method, tc.path, r.Header.Get("Content-Type"))
			}
			var p problemDoc
			r.JSON(t, &p)
			if p.Status != r.Status || p.Title == "" || p.Detail == "" || !strings.HasPrefix(p.Type, "https://berth.dev/problems/") {
				t.Errorf("%s %s: problem %+v should repeat the status %d and name the problem", tc.method, tc.path, p, r.Status)
			}
			if got := snapshot(); got != want {
				t.Errorf("%s %s changed what is stored:\nbefore: %s\nafter:  %s", tc.method, tc.path, want, got)
			}
		})
	}

	// The module uploaded first keeps running: a new order is notified.
	var info moduleInfo
	h.must(200, "GET", "/v1/modules/"+moduleName, nil).JSON(t, &info)
	if info.SHA256 != uploaded.SHA256 {
		t.Errorf("module sha256 %s after the bad uploads, want %s", info.SHA256, uploaded.SHA256)
	}
	h.appendShipped(t, "o-2", "alice")
	svc.waitNotified(t, key("o-2", 1), 20*time.Second)

	// Uploading the same module again is an update that keeps the parked aggregate.
	again := h.uploadNotifier(t, 200)
	if again.SHA256 != uploaded.SHA256 {
		t.Errorf("re-upload: sha256 %s, want %s", again.SHA256, uploaded.SHA256)
	}
	if rec := h.waitParked(t, "o-9", 5*time.Second); rec.Version != 1 || rec.Attempts != 1 {
		t.Errorf("o-9 after the re-upload: %+v", rec)
	}
}
