package tests

import (
	"strings"
	"testing"
)

// TestAbsoluteFormCannotPassTheHostCheck: through the binary, over raw TCP,
// a request in absolute form naming the host's own address with a foreign
// Host header — which net/http answers by the target's host, dropping the
// header, so it passed the Host check — is a 400 absolute-form problem, a
// read or a write, and the write changes nothing; the same request in
// origin form is the Host check's 403.
func TestAbsoluteFormCannotPassTheHostCheck(t *testing.T) {
	h := newHost(t, hostConfig{})
	host := strings.TrimPrefix(h.URL, "http://")
	for _, tc := range []struct {
		name, line string
		status     int
		kind       string
	}{
		{"read, absolute form", "GET http://" + host + "/v1/modules", 400, "absolute-form"},
		{"write, absolute form", "POST http://" + host + "/v1/config/reload", 400, "absolute-form"},
		{"read, origin form", "GET /v1/modules", 403, "foreign-host"},
	} {
		r := rawRequest(t, h, tc.line+" HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n", "")
		if p := brokenProblem(t, r); r.Status != tc.status || p.Type != "https://berth.dev/problems/"+tc.kind {
			t.Errorf("%s: %s, want %d %s", tc.name, r, tc.status, tc.kind)
		}
	}
	if strings.Contains(h.Stderr(), "configuration reloaded") {
		t.Error("the reload in absolute form ran")
	}
}
