package api

import (
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/berthhq/berth/config"
	"github.com/berthhq/berth/eventlog"
)

// TestBadInput sends bad requests to every endpoint of a host with a module
// deployed and one aggregate in the log: each is a problem+json 4xx of the
// right kind, naming the field at fault when there is one.
func TestBadInput(t *testing.T) {
	t.Parallel()
	h := newHost(t, "")
	if r := h.upload("shipment-notifier", ""); r.status != http.StatusCreated {
		t.Fatalf("upload: %s", r)
	}
	if r := h.ship("o-1", "b-1"); r.status != http.StatusCreated {
		t.Fatalf("append: %s", r)
	}
	sub := "/v1/subscriptions/" + notifierSub
	long := strings.Repeat("x", eventlog.MaxNameLen+1)
	tests := []struct {
		name   string
		req    req
		status int
		kind   string // the problem type after https://berth.dev/problems/
		field  string // the field the problem names, if any
		detail string // a part of the detail
	}{
		// POST /v1/events
		{"events: empty body", req{method: "POST", path: "/v1/events"}, 400, "invalid-json", "", "empty"},
		{"events: empty chunked body", req{method: "POST", path: "/v1/events", chunked: true}, 400, "invalid-json", "", "empty"},
		{"events: malformed", req{method: "POST", path: "/v1/events", body: `{"aggregateType":`}, 400, "invalid-json", "", "ends in the middle"},
		{"events: syntax error", req{method: "POST", path: "/v1/events", body: `{"aggregateType" "Order"}`}, 400, "invalid-json", "", "malformed JSON at byte"},
		{"events: not an object", req{method: "POST", path: "/v1/events", body: `[1,2]`}, 400, "invalid-json", "", "must be a JSON object, not array"},
		{"events: missing aggregateType", req{method: "POST", path: "/v1/events", body: `{"aggregateId":"o-2","events":[{"type":"OrderShipped"}]}`}, 400, "invalid-event", "aggregateType", "aggregateType is required"},
		{"events: missing aggregateId", req{method: "POST", path: "/v1/events", body: `{"aggregateType":"Order","events":[{"type":"OrderShipped"}]}`}, 400, "invalid-event", "aggregateId", "aggregateId is required"},
		{"events: no events", req{method: "POST", path: "/v1/events", body: `{"aggregateType":"Order","aggregateId":"o-2","events":[]}`}, 400, "invalid-event", "events", "at least one"},
		{"events: event without type", req{method: "POST", path: "/v1/events", body: `{"aggregateType":"Order","aggregateId":"o-2","events":[{"data":{}}]}`}, 400, "invalid-event", "events[0].type", "events[0].type is required"},
		{"events: expectedVersion a string", req{method: "POST", path: "/v1/events", body: `{"aggregateType":"Order","aggregateId":"o-2","expectedVersion":"3","events":[{"type":"A"}]}`}, 400, "invalid-json", "expectedVersion", "must be an integer, not string"},
		{"events: expectedVersion a fraction", req{method: "POST", path: "/v1/events", body: `{"aggregateType":"Order","aggregateId":"o-2","expectedVersion":1.5,"events":[{"type":"A"}]}`}, 400, "invalid-json", "expectedVersion", "must be an integer"},
		{"events: expectedVersion negative", req{method: "POST", path: "/v1/events", body: `{"aggregateType":"Order","aggregateId":"o-2","expectedVersion":-1,"events":[{"type":"A"}]}`}, 400, "invalid-event", "expectedVersion", "0 or more"},
		{"events: events not an array", req{method: "POST", path: "/v1/events", body: `{"aggregateType":"Order","aggregateId":"o-2","events":"A"}`}, 400, "invalid-json", "events", "must be an array"},
		{"events: aggregateType a number", req{method: "POST", path: "/v1/events", body: `{"aggregateType":7,"aggregateId":"o-2","events":[{"type":"A"}]}`}, 400, "invalid-json", "aggregateType", "must be a string, not number"},
		{"events: unknown field", req{method: "POST", path: "/v1/events", body: `{"aggregateType":"Order","aggregateId":"o-2","colour":"red","events":[{"type":"A"}]}`}, 400, "invalid-json", "colour", `unknown field "colour"`},
		{"events: trailing data", req{method: "POST", path: "/v1/events", body: `{"aggregateType":"Order","aggregateId":"o-2","events":[{"type":"A"}]} {}`}, 400, "invalid-json", "", "data after its JSON object"},
		{"events: name too long", req{method: "POST", path: "/v1/events", body: `{"aggregateType":"` + long + `","aggregateId":"o-2","events":[{"type":"A"}]}`}, 400, "invalid-event", "", "more than"},
		{"events: body over the limit", req{method: "POST", path: "/v1/events", body: `{"aggregateType":"` + strings.Repeat("x", int(config.DefaultMaxBodySize)) + `"}`}, 413, "too-large", "", "exceeds"},
		{"events: version conflict", req{method: "POST", path: "/v1/events", body: `{"aggregateType":"Order","aggregateId":"o-1","expectedVersion":0,"events":[{"type":"OrderShipped"}]}`}, 409, "version-conflict", "", "version conflict"},

		// GET /v1/aggregates/{type}/{id}/events
		{"aggregate: unknown", req{method: "GET", path: "/v1/aggregates/Order/o-404/events"}, 404, "not-found", "", "Order/o-404"},
		{"parked: failedAfter not a time", req{method: "GET", path: "/v1/parked?failedAfter=yesterday"}, 400, "invalid-query", "failedAfter", `"yesterday"`},
		{"parked: failedBefore not RFC 3339", req{method: "GET", path: "/v1/parked?failedBefore=2026-12-03"}, 400, "invalid-query", "failedBefore", "RFC 3339"},
		{"aggregate: from not a number", req{method: "GET", path: "/v1/aggregates/Order/o-1/events?from=abc"}, 400, "invalid-query", "from", `"abc"`},
		{"aggregate: from negative", req{method: "GET", path: "/v1/aggregates/Order/o-1/events?from=-1"}, 400, "invalid-query", "from", `"-1"`},
		{"aggregate: limit zero", req{method: "GET", path: "/v1/aggregates/Order/o-1/events?limit=0"}, 400, "invalid-query", "limit", "1 to 1000"},
		{"aggregate: limit too big", req{method: "GET", path: "/v1/aggregates/Order/o-1/events?limit=1001"}, 400, "invalid-query", "limit", "1 to 1000"},
		{"aggregate: limit not a number", req{method: "GET", path: "/v1/aggregates/Order/o-1/events?limit=ten"}, 400, "invalid-query", "limit", `"ten"`},

		// modules
		{"module: unknown", req{method: "GET", path: "/v1/modules/nope"}, 404, "not-found", "", `"nope"`},
		{"module: delete unknown", req{method: "DELETE", path: "/v1/modules/nope"}, 404, "not-found", "", `"nope"`},
		{"module: wrong Content-Type", req{method: "PUT", path: "/v1/modules/m", body: `{"wasm":true}`}, 415, "unsupported-media-type", "", "application/wasm"},
		{"module: not wasm", req{method: "PUT", path: "/v1/modules/m", body: "hello", contentType: "application/wasm"}, 400, "not-wasm", "", ""},
		{"module: empty body", req{method: "PUT", path: "/v1/modules/m", contentType: "application/wasm"}, 400, "not-wasm", "", ""},
		{"module: invalid name", req{method: "PUT", path: "/v1/modules/a.b", body: "\x00asm\x01\x00\x00\x00", contentType: "application/wasm"}, 400, "invalid-name", "", ""},

		// subscriptions
		{"subscription: unknown", req{method: "GET", path: "/v1/subscriptions/nope"}, 404, "not-found", "", "nope"},
		{"subscription: pause unknown", req{method: "POST", path: "/v1/subscriptions/nope/pause"}, 404, "not-found", "", "nope"},
		{"subscription: unpause unknown", req{method: "POST", path: "/v1/subscriptions/nope/unpause"}, 404, "not-found", "", "nope"},
		{"subscription: reset unknown", req{method: "POST", path: "/v1/subscriptions/nope/reset", body: `{"position":1}`}, 404, "not-found", "", "nope"},
		{"subscription: misspelt", req{method: "GET", path: "/v1/subscriptions/ShipmentNotifier.onOrderShiped"}, 404, "not-found", "",
			`unknown subscription "ShipmentNotifier.onOrderShiped"; did you mean "ShipmentNotifier.onOrderShipped"?`},
		{"subscription: misspelt at resume", req{method: "POST", path: "/v1/subscriptions/shipmentnotifier.onordershipped/parked/Order/o-1/resume"}, 404, "not-found", "",
			`did you mean "ShipmentNotifier.onOrderShipped"?`},
		{"subscription: reset without position", req{method: "POST", path: sub + "/reset", body: `{}`}, 400, "invalid-request", "position", "position is required"},
		{"subscription: reset without body", req{method: "POST", path: sub + "/reset"}, 400, "invalid-json", "", "empty"},
		{"subscription: reset position a string", req{method: "POST", path: sub + "/reset", body: `{"position":"1"}`}, 400, "invalid-json", "position", "must be an integer of 0 or more"},
		{"subscription: reset position zero", req{method: "POST", path: sub + "/reset", body: `{"position":0}`}, 400, "out-of-range", "", "position out of range"},
		{"subscription: reset past the head", req{method: "POST", path: sub + "/reset", body: `{"position":99}`}, 400, "out-of-range", "", "position out of range"},

		// parked
		{"parked: bad state", req{method: "GET", path: "/v1/parked?state=stuck"}, 400, "invalid-query", "state", `"stuck"`},
		{"parked: bad limit", req{method: "GET", path: "/v1/parked?limit=-3"}, 400, "invalid-query", "limit", `"-3"`},
		{"parked: bad cursor", req{method: "GET", path: "/v1/parked?after=garbage"}, 400, "invalid-query", "after", "cursor"},
		{"parked: not parked", req{method: "GET", path: sub + "/parked/Order/o-1"}, 404, "not-found", "", "not parked"},
		{"parked: unknown subscription", req{method: "GET", path: "/v1/subscriptions/nope/parked/Order/o-1"}, 404, "not-found", "", "unknown subscription"},
		{"parked: resume not parked", req{method: "POST", path: sub + "/parked/Order/o-1/resume"}, 404, "not-found", "", "not parked"},
		{"parked: skip not parked", req{method: "POST", path: sub + "/parked/Order/o-1/skip", body: `{"reason":"test"}`}, 404, "not-found", "", "not parked"},
		{"parked: resume unknown subscription", req{method: "POST", path: "/v1/subscriptions/nope/parked/Order/o-1/resume"}, 404, "not-found", "", "unknown subscription"},
		{"parked: resume with throughVersion", req{method: "POST", path: sub + "/parked/Order/o-1/resume", body: `{"throughVersion":2}`}, 400, "invalid-request", "throughVersion", "applies to skip"},
		{"parked: resume unknown field", req{method: "POST", path: sub + "/parked/Order/o-1/resume", body: `{"why":"x"}`}, 400, "invalid-json", "why", `unknown field "why"`},
		{"parked: skip reason a number", req{method: "POST", path: sub + "/parked/Order/o-1/skip", body: `{"reason":5}`}, 400, "invalid-json", "reason", "must be a string"},
		{"parked: skip body over the limit", req{method: "POST", path: sub + "/parked/Order/o-1/skip", body: `{"reason":"` + strings.Repeat("x", int(config.DefaultMaxBodySize)) + `"}`}, 413, "too-large", "", "exceeds"},

		// routes
		{"route: unknown", req{method: "GET", path: "/v1/nope"}, 404, "not-found", "", "no route GET /v1/nope"},
		{"route: unknown method", req{method: "DELETE", path: "/v1/events"}, 405, "method-not-allowed", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := problemOf(t, h.do(tt.req), tt.status)
			if want := "https://berth.dev/problems/" + tt.kind; p.Type != want {
				t.Errorf("type %q, want %q", p.Type, want)
			}
			if p.Field != tt.field {
				t.Errorf("field %q, want %q (detail %q)", p.Field, tt.field, p.Detail)
			}
			if !strings.Contains(p.Detail, tt.detail) {
				t.Errorf("detail %q does not say %q", p.Detail, tt.detail)
			}
		})
	}

	// None of it changed what is stored.
	var mods struct{ Modules []map[string]any }
	h.do(req{method: "GET", path: "/v1/modules"}).json(t, &mods)
	if len(mods.Modules) != 1 || mods.Modules[0]["name"] != "shipment-notifier" {
		t.Errorf("modules after the bad requests: %+v", mods.Modules)
	}
	if v, err := h.events.Version(t.Context(), "Order", "o-1"); err != nil || v != 1 {
		t.Errorf("Order/o-1 at version %d (%v), want 1", v, err)
	}
	if v, err := h.events.Version(t.Context(), "Order", "o-2"); err != nil || v != 0 {
		t.Errorf("Order/o-2 at version %d (%v), want none", v, err)
	}
}

// TestModuleTooLarge: a module above server.max-module-size is a 413 and
// nothing is stored.
func TestModuleTooLarge(t *testing.T) {
	t.Parallel()
	h := newHost(t, "")
	cfg, err := config.Parse([]byte("[server]\nmax-module-size = \"64KiB\"\n"), "small.toml")
	if err != nil {
		t.Fatal(err)
	}
	h.cfg.Store(cfg)
	p := problemOf(t, h.upload("shipment-notifier", ""), http.StatusRequestEntityTooLarge)
	if !strings.Contains(p.Detail, "max-module-size") {
		t.Errorf("detail %q does not name server.max-module-size", p.Detail)
	}
	problemOf(t, h.do(req{method: "GET", path: "/v1/modules/shipment-notifier"}), http.StatusNotFound)
}

// TestReloadRefusesABadFile: a file that does not parse is a 400 naming the
// key, and the running configuration stays.
func TestReloadRefusesABadFile(t *testing.T) {
	t.Parallel()
	h := newHost(t, "")
	before := h.cfg.Load()
	if err := os.WriteFile(h.configPath, []byte("[subscription.retry]\nmax-attempts = \"many\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := problemOf(t, h.do(req{method: "POST", path: "/v1/config/reload"}), http.StatusBadRequest)
	if p.Type != "https://berth.dev/problems/invalid-config" || !strings.Contains(p.Detail, "max-attempts") {
		t.Errorf("problem %+v: want invalid-config naming max-attempts", p)
	}
	if h.cfg.Load() != before {
		t.Error("the running configuration changed")
	}
	if err := os.WriteFile(h.configPath, []byte("[subscription.retry]\nmax-attempts = 7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := h.do(req{method: "POST", path: "/v1/config/reload"}); r.status != http.StatusOK {
		t.Fatalf("reload: %s", r)
	}
	if got := h.cfg.Load().Subscription.Retry.MaxAttempts; got != 7 {
		t.Errorf("max-attempts after reload = %v, want 7", got)
	}
}

// TestNo5xxForBadInput throws junk at every route: odd path parameters,
// malformed and hostile bodies, junk queries. Nothing is a 5xx.
func TestNo5xxForBadInput(t *testing.T) {
	t.Parallel()
	h := newHost(t, "")
	if r := h.upload("shipment-notifier", ""); r.status != http.StatusCreated {
		t.Fatalf("upload: %s", r)
	}
	params := []string{"x", "%00", "%2F", "..", strings.Repeat("z", 2000), "%F0%28%8C%BC", "a%20b"}
	bodies := []string{"", "{", "}", "[]", "null", "0", `"s"`, `{"a":1}`, `{"position":-1}`, `{"throughVersion":18446744073709551615}`,
		`{"expectedVersion":9223372036854775807,"aggregateType":"T","aggregateId":"i","events":[{"type":"E","data":{"x":` + strings.Repeat("[", 20000) + `}}]}`,
		"\xff\xfe", strings.Repeat(`{"a":`, 5000)}
	queries := []string{"", "?limit=99999999999999999999", "?from=18446744073709551616", "?state=%00", "?after=%FF", "?subscription=" + strings.Repeat("s", 2000)}
	for _, rt := range h.api.routeTable() {
		if rt.path == "/v1/config/reload" {
			continue // reads the file, not the request
		}
		for _, param := range params {
			path := rt.path
			for _, name := range []string{":name", ":type", ":id"} {
				path = strings.ReplaceAll(path, name, param)
			}
			for _, body := range bodies {
				for _, q := range queries {
					r := h.do(req{method: rt.method, path: path + q, body: body})
					if r.status >= 500 {
						t.Errorf("%s %s%s with body %.40q: %s", rt.method, path, q, body, r)
					}
					if r.status >= 400 && r.header.Get("Content-Type") != "application/problem+json" {
						t.Errorf("%s %s%s: %d with Content-Type %q", rt.method, path, q, r.status, r.header.Get("Content-Type"))
					}
				}
			}
		}
	}
}
