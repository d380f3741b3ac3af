package api

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/config"
)

// TestOversizedBodyRefusedAtOnce: on every state-changing route, a request
// whose Content-Length is past the route's cap (server.max-module-size for
// the module upload, server.max-body-size for the rest) is answered 413
// problem+json naming the setting as soon as its headers are in, over a
// real connection that sends no more than a byte of the body. Before, the
// server read towards the cap and the client waited for the read timeout.
func TestOversizedBodyRefusedAtOnce(t *testing.T) {
	t.Parallel()
	// Caps below the 256KiB net/http reads of an unread body before it
	// answers, unless the connection is to close.
	cfg := smallCaps(t)
	s := New(Deps{Config: func() *config.Config { return cfg }})
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	srvCfg := cfg.Server
	for _, rt := range s.routeTable() {
		if !changesState(rt.method) {
			continue
		}
		limit, key := rt.bodyLimit(srvCfg)
		path := samplePath(rt.path)
		ct := mediaJSON
		if len(rt.body) > 0 {
			ct = rt.body[0]
		}
		head := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n{",
			rt.method, path, srv.Listener.Addr(), ct, limit+1)
		resp, body := rawExchange(t, srv.Listener.Addr().String(), head)
		var p Problem
		if err := json.Unmarshal(body, &p); err != nil || resp.StatusCode != http.StatusRequestEntityTooLarge ||
			resp.Header.Get("Content-Type") != "application/problem+json" || !strings.Contains(p.Detail, key) {
			t.Errorf("%s %s with Content-Length %d: %d %q %s, want 413 problem+json naming %s",
				rt.method, path, limit+1, resp.StatusCode, resp.Header.Get("Content-Type"), body, key)
		}
	}
}

// smallCaps is a configuration with server.max-body-size 4KiB and
// server.max-module-size 64KiB.
func smallCaps(t *testing.T) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte("[server]\nmax-body-size = \"4KiB\"\nmax-module-size = \"64KiB\"\n"), "small.toml")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestChunkedBodyPastTheCapAnsweredAtOnce: over a real connection, a
// chunked body that passes the cap in a chunk that never ends is answered
// 413 at once: the server does not read on through the rest of it first.
func TestChunkedBodyPastTheCapAnsweredAtOnce(t *testing.T) {
	t.Parallel()
	cfg := smallCaps(t)
	srv := httptest.NewServer(New(Deps{Config: func() *config.Config { return cfg }}).Handler())
	t.Cleanup(srv.Close)
	chunk := `{"aggregateType":"` + strings.Repeat("x", 6<<10)
	head := fmt.Sprintf("POST /v1/events HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s",
		srv.Listener.Addr(), 64<<10, chunk) // announces 64KiB, sends 6KiB of it
	resp, body := rawExchange(t, srv.Listener.Addr().String(), head)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), "server.max-body-size") || !resp.Close {
		t.Errorf("chunked past the cap: %d %s (closing: %v), want 413 naming server.max-body-size, closing the connection", resp.StatusCode, body, resp.Close)
	}
}

// rawExchange sends head on a new connection to addr, keeps the connection
// open for writing (the body it announces never comes) and returns the
// answer, failing the test if none comes within 10s.
func rawExchange(t *testing.T, addr, head string) (*http.Response, []byte) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to %q: %v", strings.SplitN(head, "\r\n", 2)[0], err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, body
}

// TestChunkedBodyOverTheCap: a body of unknown length (chunked) that goes
// on past the cap is a 413 naming the setting, on every route that reads a
// body (each reads it before it looks for what it acts on), and nothing is
// done.
func TestChunkedBodyOverTheCap(t *testing.T) {
	t.Parallel()
	h := newHost(t, "")
	h.cfg.Store(smallCaps(t))
	pad := strings.Repeat("x", 8<<10)
	parked := "/v1/subscriptions/" + notifierSub + "/parked/Order/o-1"
	for _, tc := range []struct {
		path, contentType, body, key string
		method                       string
	}{
		{"/v1/events", "", `{"aggregateType":"Order","aggregateId":"o-2","events":[{"type":"A","data":"` + pad + `"}]}`, "server.max-body-size", "POST"},
		{parked + "/resume", "", `{"reason":"` + pad + `"}`, "server.max-body-size", "POST"},
		{parked + "/skip", "", `{"reason":"` + pad + `"}`, "server.max-body-size", "POST"},
		{"/v1/subscriptions/" + notifierSub + "/reset", "", `{"position":1,"x":"` + pad + `"}`, "server.max-body-size", "POST"},
		{"/v1/modules/shipment-notifier", "application/wasm", string(notifier(t)) + strings.Repeat("\x00", 64<<10), "server.max-module-size", "PUT"},
	} {
		r := h.do(req{method: tc.method, path: tc.path, body: tc.body, contentType: tc.contentType, chunked: true})
		if p := problemOf(t, r, http.StatusRequestEntityTooLarge); !strings.Contains(p.Detail, tc.key) {
			t.Errorf("%s %s chunked past the cap: detail %q does not name %s", tc.method, tc.path, p.Detail, tc.key)
		}
	}
	if v, err := h.events.Version(t.Context(), "Order", "o-2"); err != nil || v != 0 {
		t.Errorf("Order/o-2 at version %d (%v) after a refused append", v, err)
	}
	if len(h.modules.List()) != 0 {
		t.Errorf("a module was stored from a refused upload: %+v", h.modules.List())
	}
}

// TestStateChangingRoutesDocument413: every state-changing route may
// answer 413 (see limitBody), and openapi.json says so.
func TestStateChangingRoutesDocument413(t *testing.T) {
	t.Parallel()
	doc := openapiMap(t)
	for _, rt := range New(Deps{Config: config.Default}).routeTable() {
		if !changesState(rt.method) {
			continue
		}
		if resp, _ := operation(doc, rt.method, openapiPath(rt.path))["responses"].(map[string]any); resp["413"] == nil {
			t.Errorf("%s %s does not document 413", rt.method, rt.path)
		}
	}
}
