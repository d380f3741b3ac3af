package api

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/berthhq/berth/config"
)

// TestHeadAnsweredAsGet: over a real connection, HEAD of every GET route
// of the table (and the console) answers what GET does — status and
// headers, Content-Length included — without a body; before, every HEAD
// was a 405. The Allow header of a 405 and of OPTIONS lists HEAD beside
// GET, and a 405's problem names the method and what the path takes.
func TestHeadAnsweredAsGet(t *testing.T) {
	t.Parallel()
	s := New(Deps{Config: config.Default})
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	do := func(method, path string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	// Routes this bare server can answer (the rest need the host's parts).
	for _, path := range []string{"/healthz", "/readyz", "/v1/openapi.json", "/metrics", "/console/", "/console/console.js", "/v1/nope"} {
		get, body := do("GET", path)
		head, none := do("HEAD", path)
		if head.StatusCode != get.StatusCode || len(none) != 0 || head.Header.Get("Content-Type") != get.Header.Get("Content-Type") {
			t.Errorf("HEAD %s: %d %q, %d bytes; GET: %d %q", path, head.StatusCode, head.Header.Get("Content-Type"), len(none), get.StatusCode, get.Header.Get("Content-Type"))
		}
		if cl := head.Header.Get("Content-Length"); cl != "" && cl != strconv.Itoa(len(body)) {
			t.Errorf("HEAD %s: Content-Length %s, GET's body has %d bytes", path, cl, len(body))
		}
	}
	for _, tc := range []struct{ method, path, allow string }{
		{"DELETE", "/v1/events", "OPTIONS, POST"},
		{"POST", "/v1/modules", "OPTIONS, GET, HEAD"},
		{"PATCH", "/v1/modules/m", "OPTIONS, DELETE, GET, HEAD, PUT"},
		{"FOO", "/v1/parked", "OPTIONS, GET, HEAD"},
	} {
		resp, body := do(tc.method, tc.path)
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != tc.allow ||
			resp.Header.Get("Content-Type") != "application/problem+json" ||
			!strings.Contains(string(body), tc.method+" is not allowed on "+tc.path) || !strings.Contains(string(body), tc.allow) {
			t.Errorf("%s %s: %d, Allow %q, %s; want 405 problem naming the method, Allow %q", tc.method, tc.path, resp.StatusCode, resp.Header.Get("Allow"), body, tc.allow)
		}
	}
	if resp, _ := do("OPTIONS", "/v1/parked"); resp.StatusCode != http.StatusNoContent || resp.Header.Get("Allow") != "OPTIONS, GET, HEAD" {
		t.Errorf("OPTIONS /v1/parked: %d, Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
	}
}
