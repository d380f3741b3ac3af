package tests

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// rawAnswer sends head (and body) to the host over one TCP connection and
// returns the answer, keeping the connection open for writing: a body
// shorter than its Content-Length is then still coming, as far as the host
// can tell. It fails the test when no answer comes within 10s.
func rawAnswer(t *testing.T, h *hostProc, head, body string) response {
	t.Helper()
	return rawExchange(t, h, head, body, false, 10*time.Second)
}

// TestOversizedBodyAnsweredAtOnce: a request whose Content-Length is past
// server.max-body-size (server.max-module-size for a module) is answered
// 413 problem+json naming the setting as soon as its headers are in, long
// before server.read-timeout (here 5 minutes), which is what the client
// waited for before; a chunked body that goes past the cap is a 413 too.
// Nothing is stored.
func TestOversizedBodyAnsweredAtOnce(t *testing.T) {
	h := newHost(t, hostConfig{Extra: "[server]\nmax-body-size = \"64KiB\"\nmax-module-size = \"1MiB\"\nread-timeout = \"5m\"\n"})
	host := strings.TrimPrefix(h.URL, "http://")
	head := func(method, path, ct string, extra string) string {
		return method + " " + path + " HTTP/1.1\r\nHost: " + host + "\r\nContent-Type: " + ct + "\r\n" + extra
	}
	over := func(n int) string { return "Content-Length: " + strconv.Itoa(n) + "\r\n" }
	for _, tc := range []struct {
		name, method, path, ct, extra, body, key string
	}{
		{"append", "POST", "/v1/events", "application/json", over(64<<10 + 1), "{", "server.max-body-size"},
		{"append, huge", "POST", "/v1/events", "application/json", over(1 << 40), `{"aggregateType":`, "server.max-body-size"},
		{"resume", "POST", "/v1/subscriptions/S.h/parked/T/i/resume", "application/json", over(1 << 20), "{", "server.max-body-size"},
		{"pause, which takes no body", "POST", "/v1/subscriptions/S.h/pause", "application/json", over(1 << 20), "", "server.max-body-size"},
		{"module", "PUT", "/v1/modules/m", "application/wasm", over(1<<20 + 1), "\x00asm", "server.max-module-size"},
		{"append, chunked past the cap", "POST", "/v1/events", "application/json", "Transfer-Encoding: chunked\r\n",
			strconv.FormatInt(80<<10, 16) + "\r\n" + `{"aggregateType":"` + strings.Repeat("x", 80<<10-18) + "\r\n", "server.max-body-size"},
	} {
		r := rawAnswer(t, h, head(tc.method, tc.path, tc.ct, tc.extra), tc.body)
		if p := brokenProblem(t, r); r.Status != 413 || p.Status != 413 || !strings.Contains(p.Detail, tc.key) {
			t.Errorf("%s: %s, want 413 naming %s", tc.name, r, tc.key)
		}
	}
	h.must(404, "GET", "/v1/modules/m", nil)
	// Nothing reached the log: the first append that fits is its first commit.
	var res struct {
		Position uint64 `json:"position"`
	}
	h.must(201, "POST", "/v1/events", map[string]any{"aggregateType": "T", "aggregateId": "i", "events": []map[string]any{{"type": "E"}}}).JSON(t, &res)
	if res.Position != 1 {
		t.Errorf("the first append that fits is at position %d, want 1", res.Position)
	}
}
