package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/berthhq/berth/config"
)

// TestAbsoluteFormRefused: over a real connection, a request whose target
// is in absolute form is a 400 problem, whatever its Host header says —
// before, net/http took the host from the target and dropped the header,
// so "GET http://127.0.0.1:PORT/… " with "Host: evil.example" passed the
// Host check. CONNECT's authority form is refused too. The same path in
// origin form with the foreign Host is still the 403 of the Host check,
// and with the server's own Host it is served.
func TestAbsoluteFormRefused(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(New(Deps{Config: config.Default}).Handler())
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()
	tests := []struct {
		name, line, host string
		status           int
		kind             string
	}{
		{"absolute, foreign Host", "GET http://" + addr + "/v1/openapi.json", "evil.example", 400, "absolute-form"},
		{"absolute, own Host", "GET http://" + addr + "/v1/openapi.json", addr, 400, "absolute-form"},
		{"absolute, foreign host in the target", "GET http://evil.example/v1/openapi.json", addr, 400, "absolute-form"},
		{"absolute, a write", "POST http://" + addr + "/v1/subscriptions/s/pause", "evil.example", 400, "absolute-form"},
		{"absolute, https", "GET https://" + addr + "/healthz", addr, 400, "absolute-form"},
		{"authority form", "CONNECT " + addr, addr, 400, "absolute-form"},
		{"origin form, foreign Host", "GET /v1/openapi.json", "evil.example", 403, "foreign-host"},
	}
	for _, tt := range tests {
		head := fmt.Sprintf("%s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", tt.line, tt.host)
		resp, body := rawExchange(t, addr, head)
		var p Problem
		if err := json.Unmarshal(body, &p); err != nil || resp.StatusCode != tt.status || p.Status != tt.status ||
			resp.Header.Get("Content-Type") != "application/problem+json" || p.Type != "https://berth.dev/problems/"+tt.kind {
			t.Errorf("%s: %d %s, want %d %s problem", tt.name, resp.StatusCode, body, tt.status, tt.kind)
		}
		if tt.kind == "absolute-form" && !strings.Contains(p.Detail, "no proxy") {
			t.Errorf("%s: detail %q does not say why", tt.name, p.Detail)
		}
	}
	head := fmt.Sprintf("GET /v1/openapi.json HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", addr)
	if resp, body := rawExchange(t, addr, head); resp.StatusCode != http.StatusOK {
		t.Errorf("origin form with the server's Host: %d %.200s", resp.StatusCode, body)
	}
}
