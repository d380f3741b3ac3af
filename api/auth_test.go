package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/berthhq/berth/internal/buildinfo"
)

// TestAuth runs requests with the tokens of authTOML: a missing or unknown
// token is a 401 with WWW-Authenticate, a role below the route's a 403, a
// role that allows it reaches the handler.
func TestAuth(t *testing.T) {
	t.Parallel()
	h := parkedWithAuth(t, "o-1")
	sub := "/v1/subscriptions/" + notifierSub
	resume := sub + "/parked/Order/o-1/resume"
	event := `{"aggregateType":"Order","aggregateId":"o-9","events":[{"type":"OrderPlaced"}]}`

	tests := []struct {
		name   string
		req    req
		status int
	}{
		{"no token", req{method: "GET", path: "/v1/modules"}, 401},
		{"unknown token", req{method: "GET", path: "/v1/modules", token: "guess"}, 401},
		{"not a bearer token", req{method: "GET", path: "/v1/modules", token: ""}, 401},
		{"no token on metrics", req{method: "GET", path: "/metrics"}, 401},
		{"no token on resume", req{method: "POST", path: resume}, 401},

		{"reader reads modules", req{method: "GET", path: "/v1/modules", token: readerToken}, 200},
		{"reader reads parked", req{method: "GET", path: sub + "/parked/Order/o-1", token: readerToken}, 200},
		{"reader reads metrics", req{method: "GET", path: "/metrics", token: readerToken}, 200},
		{"reader may not upload", req{method: "PUT", path: "/v1/modules/m", token: readerToken, body: "x", contentType: "application/wasm"}, 403},
		{"reader may not append", req{method: "POST", path: "/v1/events", token: readerToken, body: event}, 403},
		{"reader may not resume", req{method: "POST", path: resume, token: readerToken}, 403},
		{"reader may not pause", req{method: "POST", path: sub + "/pause", token: readerToken}, 403},
		{"reader may not reload", req{method: "POST", path: "/v1/config/reload", token: readerToken}, 403},

		{"deployer may not resume", req{method: "POST", path: resume, token: deployerToken}, 403},
		{"deployer may not skip", req{method: "POST", path: sub + "/parked/Order/o-1/skip", token: deployerToken}, 403},
		{"deployer may not reload", req{method: "POST", path: "/v1/config/reload", token: deployerToken}, 403},
		{"operator may not upload", req{method: "PUT", path: "/v1/modules/m", token: operatorToken, body: "x", contentType: "application/wasm"}, 403},
		{"operator may not append", req{method: "POST", path: "/v1/events", token: operatorToken, body: event}, 403},
		{"operator may not delete", req{method: "DELETE", path: "/v1/modules/shipment-notifier", token: operatorToken}, 403},
		{"operator may not reload", req{method: "POST", path: "/v1/config/reload", token: operatorToken}, 403},

		{"deployer appends", req{method: "POST", path: "/v1/events", token: deployerToken, body: event}, 201},
		{"operator pauses", req{method: "POST", path: sub + "/pause", token: operatorToken}, 200},
		{"operator unpauses", req{method: "POST", path: sub + "/unpause", token: operatorToken}, 200},
		{"operator resumes", req{method: "POST", path: resume, token: operatorToken, body: `{"reason":"on call"}`}, 202},
		{"admin appends", req{method: "POST", path: "/v1/events", token: adminToken, body: event}, 201},
		{"admin resumes", req{method: "POST", path: resume, token: adminToken}, 202},
		{"admin reloads", req{method: "POST", path: "/v1/config/reload", token: adminToken}, 200},

		{"healthz needs no token", req{method: "GET", path: "/healthz"}, 200},
		{"readyz needs no token", req{method: "GET", path: "/readyz"}, 200},
		{"openapi needs no token", req{method: "GET", path: "/v1/openapi.json"}, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.do(tt.req)
			if tt.name == "not a bearer token" {
				hr := tt.req
				r = h.doHeader(hr, "Authorization", "Basic cmVhZGVyOnNlY3JldA==")
			}
			switch {
			case tt.status >= 400:
				p := problemOf(t, r, tt.status)
				if tt.status == 401 && !strings.HasPrefix(r.header.Get("WWW-Authenticate"), `Bearer realm="berth"`) {
					t.Errorf("WWW-Authenticate %q", r.header.Get("WWW-Authenticate"))
				}
				if tt.status == 403 && !strings.Contains(p.Detail, "this needs") {
					t.Errorf("detail %q does not say the role needed", p.Detail)
				}
			case r.status != tt.status:
				t.Errorf("status %s, want %d", r, tt.status)
			}
		})
	}

	// The operator's name is kept in the parked record's history.
	r := h.do(req{method: "GET", path: sub + "/parked/Order/o-1", token: readerToken})
	if !strings.Contains(string(r.body), `"actor":"oncall","reason":"on call"`) {
		t.Errorf("history does not name the operator: %s", r.body)
	}
}

// doHeader is do with one more request header.
func (h *testHost) doHeader(r req, key, value string) response {
	h.t.Helper()
	return serveWith(h.api, r, func(hr *http.Request) { hr.Header.Set(key, value) })
}

// TestHealthAndMetrics: /healthz and /readyz answer without auth; /readyz
// is a 503 problem while the host starts; /metrics is the Prometheus text
// format with the request counter by route and code, and berth_build_info
// naming the running build.
func TestHealthAndMetrics(t *testing.T) {
	t.Parallel()
	h := newHost(t, "")
	// The test host is served as the binary serves it (DepsOf), so the
	// answer reports the data directory's disk too.
	var health struct {
		Status string `json:"status"`
		Disk   struct {
			Writable bool `json:"writable"`
		} `json:"disk"`
	}
	if r := h.do(req{method: "GET", path: "/healthz"}); r.status != 200 || json.Unmarshal(r.body, &health) != nil ||
		health.Status != "ok" || !health.Disk.Writable {
		t.Errorf("healthz: %s", r)
	}
	if r := h.do(req{method: "GET", path: "/readyz"}); r.status != 200 || !strings.Contains(string(r.body), "ready") {
		t.Errorf("readyz: %s", r)
	}
	h.do(req{method: "GET", path: "/v1/modules/nope"})
	h.do(req{method: "GET", path: "/v1/nope/at/all"})
	h.do(req{method: "BREW", path: "/v1/nope/coffee"}) // a method of its own: counted as "other"
	h.do(req{method: "POST", path: "/v1/events", body: `{"aggregateType":"A","aggregateId":"1","events":[{"type":"E"}]}`})

	r := h.do(req{method: "GET", path: "/metrics"})
	if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain") {
		t.Fatalf("metrics: %d %s", r.status, r.header.Get("Content-Type"))
	}
	body := string(r.body)
	build := buildinfo.Read()
	for _, want := range []string{
		"# TYPE berth_http_requests_total counter",
		`berth_http_requests_total{code="200",method="GET",route="/healthz"} 1`,
		`berth_http_requests_total{code="404",method="GET",route="/v1/modules/:name"} 1`,
		`berth_http_requests_total{code="404",method="GET",route="unmatched"} 1`,
		`berth_http_requests_total{code="404",method="other",route="unmatched"} 1`,
		`berth_http_requests_total{code="201",method="POST",route="/v1/events"} 1`,
		"berth_events_appended_total 1",
		"# TYPE berth_build_info gauge",
		fmt.Sprintf(`berth_build_info{goversion=%q,revision=%q,version=%q} 1`, build.GoVersion, build.Revision, build.Version),
		"go_goroutines",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if strings.Contains(body, "/v1/nope/at/all") {
		t.Error("an unknown path became a metric label")
	}

	notReady := New(Deps{Config: h.cfg.Load, Ready: func() bool { return false }})
	p := problemOf(t, serve(notReady, req{method: "GET", path: "/readyz"}), http.StatusServiceUnavailable)
	if p.Type != "https://berth.dev/problems/not-ready" {
		t.Errorf("readyz while starting: %+v", p)
	}
}
