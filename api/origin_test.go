package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/config"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/subscription"
)

func TestHostAllowed(t *testing.T) {
	loopback := netip.MustParseAddr("127.0.0.1")
	lan := netip.MustParseAddr("10.0.0.5")
	tests := []struct {
		host    string
		served  netip.Addr
		listen  string
		allowed []string
		want    bool
	}{
		// Listening on loopback: loopback names, whatever the port.
		{"127.0.0.1:8080", loopback, "127.0.0.1", nil, true},
		{"localhost:8080", loopback, "127.0.0.1", nil, true},
		{"LocalHost:8080", loopback, "127.0.0.1", nil, true},
		{"[::1]:8080", loopback, "127.0.0.1", nil, true},
		{"127.0.0.2:8080", loopback, "127.0.0.1", nil, true},
		{"localhost", loopback, "127.0.0.1", nil, true},
		{"localhost:9000", loopback, "127.0.0.1", nil, true}, // an ssh tunnel
		{"[::ffff:127.0.0.1]:8080", loopback, "127.0.0.1", nil, true},
		{"[::1]:8080", netip.MustParseAddr("::1"), "::1", nil, true},
		{"localhost:8080", loopback, "localhost", nil, true},
		// DNS rebinding: a name that resolves to loopback is not a loopback name.
		{"evil.example:8080", loopback, "127.0.0.1", nil, false},
		{"127.0.0.1.nip.io:8080", loopback, "127.0.0.1", nil, false},
		{"localhost.evil.example:8080", loopback, "127.0.0.1", nil, false},
		{"localhost.:8080", loopback, "127.0.0.1", nil, false},
		{"0.0.0.0:8080", loopback, "127.0.0.1", nil, false},
		{"10.0.0.5:8080", loopback, "127.0.0.1", nil, false},
		{"", loopback, "127.0.0.1", nil, false},
		{":8080", loopback, "127.0.0.1", nil, false},
		// server.allowed-hosts.
		{"berth.example.com:443", loopback, "127.0.0.1", []string{"berth.example.com"}, true},
		{"BERTH.example.com", loopback, "127.0.0.1", []string{"berth.example.com"}, true},
		{"other.example.com", loopback, "127.0.0.1", []string{"berth.example.com"}, false},
		{"[fe80::1]:8080", loopback, "127.0.0.1", []string{"[fe80::1]"}, true},
		{"[fe80::0:1]:8080", loopback, "127.0.0.1", []string{"fe80::1"}, true},
		{"anything.example", loopback, "127.0.0.1", []string{"*"}, true},
		// Listening on an address of a network: that address.
		{"10.0.0.5:8080", lan, "10.0.0.5", nil, true},
		{"10.0.0.6:8080", lan, "10.0.0.5", nil, false},
		{"localhost:8080", lan, "10.0.0.5", nil, false},
		{"berth.lan:8080", lan, "10.0.0.5", nil, false},
		// On every interface: the address the request came in on.
		{"10.0.0.5:8080", lan, "0.0.0.0", nil, true},
		{"192.168.1.9:8080", lan, "0.0.0.0", nil, false},
		{"localhost:8080", loopback, "", nil, true},
		{"berth.lan:8080", lan, "", nil, false},
		// ... or, served in-process with no connection, any IP and localhost.
		{"192.168.1.9:8080", netip.IPv4Unspecified(), "0.0.0.0", nil, true},
		{"localhost", netip.IPv4Unspecified(), "", nil, true},
		{"berth.lan", netip.IPv4Unspecified(), "", nil, false},
		// Listening on a name: that name.
		{"berth.lan:8080", netip.Addr{}, "berth.lan", nil, true},
		{"Berth.LAN", lan, "berth.lan", nil, true},
		{"evil.example", netip.Addr{}, "berth.lan", nil, false},
	}
	for _, tt := range tests {
		if got := hostAllowed(tt.host, tt.served, tt.listen, tt.allowed); got != tt.want {
			t.Errorf("hostAllowed(%q, served %v, listen %q, allowed %q) = %v, want %v", tt.host, tt.served, tt.listen, tt.allowed, got, tt.want)
		}
	}
}

// header is a request's Host and the headers a browser adds.
type header struct {
	host      string // "" for the tests' own, testHostName
	origin    string
	fetchSite string // Sec-Fetch-Site
}

// doAs sends r with hd's Host and headers.
func (h *testHost) doAs(r req, hd header) response {
	h.t.Helper()
	resp := serveWith(h.api, r, func(hr *http.Request) {
		if hd.host != "" {
			hr.Host = hd.host
		}
		if hd.origin != "" {
			hr.Header.Set("Origin", hd.origin)
		}
		if hd.fetchSite != "" {
			hr.Header.Set("Sec-Fetch-Site", hd.fetchSite)
		}
	})
	checkResponse(h.t, h.api, r.method, r.path, resp)
	return resp
}

// TestRefusedRequestsChangeNothing sends every write of the API (method ×
// Content-Type × Origin × Host) as a page on another origin, a DNS-rebinding
// page or a simple request would: each is a 403 or 415 problem, and nothing
// stored changes — no event appended, the module still there, the record
// still parked, the subscription neither paused nor reset, the
// configuration not reloaded.
func TestRefusedRequestsChangeNothing(t *testing.T) {
	t.Parallel()
	h := newHost(t, "")
	if r := h.upload("shipment-notifier", ""); r.status != http.StatusCreated {
		t.Fatalf("upload: %s", r)
	}
	if r := h.ship("o-1", "unknown"); r.status != http.StatusCreated {
		t.Fatalf("append: %s", r)
	}
	h.waitParked("o-1")
	// A reload that went through would be seen: the file now says 7.
	if err := os.WriteFile(h.configPath, []byte("[subscription.retry]\nmax-attempts = 7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := h.cfg.Load()
	sub := "/v1/subscriptions/" + notifierSub
	parked := sub + "/parked/Order/o-1"
	snapshot := func() string {
		var b strings.Builder
		for _, p := range []string{"/v1/modules", "/v1/aggregates/Order/o-1/events", "/v1/aggregates/Order/o-2/events", "/v1/parked", parked, sub} {
			fmt.Fprintf(&b, "%s\n", h.do(req{method: "GET", path: p}).body)
		}
		return b.String()
	}
	// The park is seen a moment before the engine moves its checkpoint past
	// the event: wait for the subscription to be still.
	checkfor.Nil(t, 20*time.Second, 10*time.Millisecond, func() error {
		var st struct {
			Lag                           uint64
			Checkpoint, DurableCheckpoint uint64
		}
		if err := json.Unmarshal(h.do(req{method: "GET", path: sub}).body, &st); err != nil {
			t.Fatal(err)
		}
		if st.Lag == 0 && st.Checkpoint == st.DurableCheckpoint {
			return nil
		}
		return fmt.Errorf("the subscription did not catch up: %+v", st)
	})
	before := snapshot()

	// The writes, each with the body it documents.
	type write struct {
		method, path, ct, body string
	}
	wasm := string(notifier(t))
	writes := []write{
		{"POST", "/v1/events", "application/json", `{"aggregateType":"Order","aggregateId":"o-2","events":[{"type":"OrderShipped","data":{}}]}`},
		{"POST", "/v1/config/reload", "", ""},
		{"POST", parked + "/resume", "application/json", `{"reason":"x"}`},
		{"POST", parked + "/resume", "", ""},
		{"POST", parked + "/skip", "application/json", `{"reason":"x"}`},
		{"POST", parked + "/skip", "", ""},
		{"POST", sub + "/pause", "", ""},
		{"POST", sub + "/reset", "application/json", `{"position":1}`},
		{"DELETE", "/v1/modules/shipment-notifier", "", ""},
		{"PUT", "/v1/modules/other-notifier", "application/wasm", wasm},
	}
	// What a hostile page can do to them.
	const evil = "http://evil.example"
	type variant struct {
		name   string
		hd     header
		ct     *string // replaces the write's Content-Type
		body   *string // replaces the write's body
		status int
		kind   string
	}
	str := func(s string) *string { return &s }
	variants := []variant{
		{"cross-site fetch", header{origin: evil, fetchSite: "cross-site"}, nil, nil, 403, "cross-origin"},
		{"cross-site, no Origin", header{fetchSite: "cross-site"}, nil, nil, 403, "cross-origin"},
		{"page on another local port", header{origin: "http://127.0.0.1:3000", fetchSite: "same-site"}, nil, nil, 403, "cross-origin"},
		{"old browser, foreign Origin", header{origin: evil}, nil, nil, 403, "cross-origin"},
		{"old browser, another port", header{origin: "http://127.0.0.1:3000"}, nil, nil, 403, "cross-origin"},
		{"sandboxed page, Origin null", header{origin: "null"}, nil, nil, 403, "cross-origin"},
		{"DNS rebinding", header{host: "evil.example:8080", origin: "http://evil.example:8080", fetchSite: "same-origin"}, nil, nil, 403, "foreign-host"},
		{"DNS rebinding, no Origin", header{host: "evil.example:8080"}, nil, nil, 403, "foreign-host"},
		{"rebinding to a loopback-looking name", header{host: "127.0.0.1.nip.io:8080", origin: "http://127.0.0.1.nip.io:8080", fetchSite: "same-origin"}, nil, nil, 403, "foreign-host"},
		{"Host 0.0.0.0", header{host: "0.0.0.0:8080", origin: "http://0.0.0.0:8080", fetchSite: "same-origin"}, nil, nil, 403, "foreign-host"},
		{"text/plain body", header{}, str("text/plain"), str(`{"reason":"x"}`), 415, "unsupported-media-type"},
		{"text/plain, empty body", header{}, str("text/plain;charset=UTF-8"), str(""), 415, "unsupported-media-type"},
		{"form post", header{}, str("application/x-www-form-urlencoded"), str("a=1"), 415, "unsupported-media-type"},
		{"empty form post", header{}, str("application/x-www-form-urlencoded"), str(""), 415, "unsupported-media-type"},
		{"multipart form post", header{}, str("multipart/form-data; boundary=x"), str("--x--\r\n"), 415, "unsupported-media-type"},
		{"body without Content-Type", header{}, str(""), str(`{"position":1}`), 415, "unsupported-media-type"},
		{"malformed Content-Type", header{}, str("application/json;;"), str(`{}`), 415, "unsupported-media-type"},
	}
	for _, w := range writes {
		for _, v := range variants {
			r := req{method: w.method, path: w.path, contentType: w.ct, body: w.body}
			if v.ct != nil {
				r.contentType = *v.ct
			}
			if v.body != nil {
				r.body = *v.body
			}
			name := fmt.Sprintf("%s %s (%s, %q): %s", w.method, w.path, r.contentType, strings.ToValidUTF8(r.body[:min(len(r.body), 20)], "?"), v.name)
			var resp response
			if v.ct != nil && *v.ct == "" && r.body != "" {
				resp = h.doUntyped(r)
			} else {
				resp = h.doAs(r, v.hd)
			}
			if resp.status != v.status {
				t.Errorf("%s: %s, want %d", name, resp, v.status)
				continue
			}
			p := problemOf(t, resp, v.status)
			if p.Type != "https://berth.dev/problems/"+v.kind {
				t.Errorf("%s: problem %s, want %s", name, p.Type, v.kind)
			}
		}
	}
	if after := snapshot(); after != before {
		t.Errorf("the refused requests changed what is stored:\nbefore %s\nafter  %s", before, after)
	}
	if h.cfg.Load() != cfg {
		t.Error("a refused reload changed the running configuration")
	}
	if st, err := h.engine.Status(t.Context(), notifierSub); err != nil || st.State != subscription.StateRunning {
		t.Errorf("subscription after the refused requests: %+v, %v; want it running", st, err)
	}

	// Reads are refused to a foreign Host too: a rebinding page could read
	// what is parked.
	for _, path := range []string{"/v1/parked", parked, "/v1/modules", sub, "/healthz", "/v1/openapi.json", "/console/", "/v1/nothing"} {
		for _, host := range []string{"evil.example:8080", "127.0.0.1.nip.io:8080"} {
			r := h.doAs(req{method: "GET", path: path}, header{host: host, origin: "http://" + host, fetchSite: "same-origin"})
			if p := problemOf(t, r, http.StatusForbidden); p.Type != "https://berth.dev/problems/foreign-host" || !strings.Contains(p.Detail, "server.allowed-hosts") {
				t.Errorf("GET %s with Host %s: %+v, want foreign-host naming server.allowed-hosts", path, host, p)
			}
		}
	}
}

// doUntyped sends r's body without any Content-Type.
func (h *testHost) doUntyped(r req) response {
	h.t.Helper()
	resp := serveWith(h.api, r, func(hr *http.Request) { hr.Header.Del("Content-Type") })
	checkResponse(h.t, h.api, r.method, r.path, resp)
	return resp
}

// TestAllowedRequestsPass: what the console, the CLI and curl send gets
// through — same-origin browser requests, no Origin at all, loopback Hosts
// on any port, documented media types with parameters, empty bodies
// without a Content-Type — and so do cross-origin reads, which the browser
// does not let the page see.
func TestAllowedRequestsPass(t *testing.T) {
	t.Parallel()
	h := newHost(t, "")
	cfg := *h.cfg.Load()
	cfg.Server.AllowedHosts = []string{"berth.example.com"}
	h.cfg.Store(&cfg)
	if r := h.upload("shipment-notifier", ""); r.status != http.StatusCreated {
		t.Fatalf("upload: %s", r)
	}
	sub := "/v1/subscriptions/" + notifierSub
	event := func(id string) string {
		return `{"aggregateType":"Order","aggregateId":"` + id + `","events":[{"type":"OrderShipped","data":{}}]}`
	}
	self := "http://" + testHostName
	tests := []struct {
		name   string
		req    req
		hd     header
		status int
	}{
		{"curl: no Origin", req{method: "POST", path: sub + "/pause"}, header{}, 200},
		{"console: same-origin", req{method: "POST", path: sub + "/unpause"}, header{origin: self, fetchSite: "same-origin"}, 200},
		{"old browser, same origin", req{method: "POST", path: sub + "/pause"}, header{origin: self}, 200},
		{"typed into the address bar", req{method: "POST", path: sub + "/unpause"}, header{fetchSite: "none"}, 200},
		{"Host localhost", req{method: "POST", path: "/v1/events", body: event("a-1")}, header{host: "localhost:8080", origin: "http://localhost:8080", fetchSite: "same-origin"}, 201},
		{"Host [::1]", req{method: "POST", path: "/v1/events", body: event("a-2")}, header{host: "[::1]:8080"}, 201},
		{"Host without a port", req{method: "POST", path: "/v1/events", body: event("a-3")}, header{host: "localhost"}, 201},
		{"Host through a tunnel", req{method: "POST", path: "/v1/events", body: event("a-4")}, header{host: "localhost:9000", origin: "http://localhost:9000"}, 201},
		{"Host of server.allowed-hosts", req{method: "POST", path: "/v1/events", body: event("a-5")}, header{host: "berth.example.com", origin: "https://berth.example.com", fetchSite: "same-origin"}, 201},
		{"JSON with a charset", req{method: "POST", path: "/v1/events", body: event("a-6"), contentType: "application/json; charset=utf-8"}, header{}, 201},
		{"JSON in capitals", req{method: "POST", path: "/v1/events", body: event("a-7"), contentType: "Application/JSON"}, header{}, 201},
		{"module as octet-stream", req{method: "PUT", path: "/v1/modules/shipment-notifier", body: string(notifier(t)), contentType: "application/octet-stream"}, header{}, 200},
		{"resume: empty chunked body without Content-Type", req{method: "POST", path: sub + "/parked/Order/nope/resume", chunked: true}, header{}, 404},
		{"skip: empty JSON-typed body", req{method: "POST", path: sub + "/parked/Order/nope/skip", contentType: "application/json"}, header{}, 404},
		{"events: empty body without Content-Type is the handler's 400", req{method: "POST", path: "/v1/events"}, header{}, 400},
		{"cross-origin read", req{method: "GET", path: "/v1/parked"}, header{origin: "http://evil.example", fetchSite: "cross-site"}, 200},
		{"cross-origin console page", req{method: "GET", path: "/console/"}, header{fetchSite: "cross-site"}, 200},
	}
	for _, tt := range tests {
		if r := h.doAs(tt.req, tt.hd); r.status != tt.status {
			t.Errorf("%s: %s %s: %s, want %d", tt.name, tt.req.method, tt.req.path, r, tt.status)
		}
	}
}

// TestHostCheckOverAConnection serves the API on a real listener, where the
// Host is checked against the connection's own address.
func TestHostCheckOverAConnection(t *testing.T) {
	t.Parallel()
	h := newHost(t, "")
	srv := httptest.NewServer(h.api.Handler())
	t.Cleanup(srv.Close)
	port := strings.TrimPrefix(srv.URL, "http://127.0.0.1:")
	for _, tt := range []struct {
		host   string
		status int
	}{
		{"127.0.0.1:" + port, 200},
		{"localhost:" + port, 200},
		{"[::1]:" + port, 200},
		{"evil.example:" + port, 403},
		{"10.11.12.13:" + port, 403},
	} {
		hr, err := http.NewRequestWithContext(context.Background(), "GET", srv.URL+"/v1/parked", nil)
		if err != nil {
			t.Fatal(err)
		}
		hr.Host = tt.host
		resp, err := srv.Client().Do(hr)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.status {
			t.Errorf("GET /v1/parked with Host %s: %d %s, want %d", tt.host, resp.StatusCode, body, tt.status)
		}
	}
}

// TestListenAnywhereHostCheck: with tokens and server.listen on every
// interface, a request served in-process may name any IP address, but no
// name the host was not given.
func TestListenAnywhereHostCheck(t *testing.T) {
	t.Parallel()
	cfg, err := config.Parse([]byte(authTOML+"\n[server]\nlisten = \"0.0.0.0:8080\"\n"), "auth.toml")
	if err != nil {
		t.Fatal(err)
	}
	s := New(Deps{Config: func() *config.Config { return cfg }, Logger: slog.New(slog.DiscardHandler)})
	for host, want := range map[string]int{"192.168.1.9:8080": 200, "localhost:8080": 200, "berth.lan:8080": 403} {
		r := serveWith(s, req{method: "GET", path: "/healthz"}, func(hr *http.Request) { hr.Host = host })
		if r.status != want {
			t.Errorf("GET /healthz with Host %s: %s, want %d", host, r, want)
		}
	}
}
