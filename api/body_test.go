package api

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/berthhq/berth/config"
)

// brokenBody yields data, then fails as a connection that broke off does
// (a malformed chunk, fewer bytes than the Content-Length).
type brokenBody struct {
	r   io.Reader
	err error
}

func (b *brokenBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF {
		return n, b.err
	}
	return n, err
}

func (b *brokenBody) Close() error { return nil }

// TestBodyIsOneJSONValue: every JSON body is one JSON value, then only
// whitespace; anything after it, and a body that breaks off after a whole
// value, is a 400 — and nothing is done.
func TestBodyIsOneJSONValue(t *testing.T) {
	t.Parallel()
	h := newHost(t, "")
	h.upload("shipment-notifier", "")
	h.ship("o-1", "unknown")
	h.waitParked("o-1")
	parked := "/v1/subscriptions/" + notifierSub + "/parked/Order/o-1"
	event := `{"aggregateType":"Order","aggregateId":"o-2","events":[{"type":"OrderShipped"}]}`
	writes := []struct{ path, body string }{
		{"/v1/events", event},
		{parked + "/resume", `{"reason":"x"}`},
		{parked + "/skip", `{"reason":"x"}`},
		{"/v1/subscriptions/" + notifierSub + "/reset", `{"position":1}`},
	}
	for _, w := range writes {
		for _, tail := range []string{"]", "}", " ]", "\n}\n", "x", "{}", "null", "1", `"s"`, " \t\r\n ,"} {
			r := h.do(req{method: "POST", path: w.path, body: w.body + tail, token: deployerToken})
			p := problemOf(t, r, http.StatusBadRequest)
			if !strings.Contains(p.Detail, "after its JSON object") {
				t.Errorf("POST %s with %q after the body: detail %q", w.path, tail, p.Detail)
			}
		}
		for _, why := range []error{io.ErrUnexpectedEOF, errors.New("http: invalid byte in chunk length")} {
			r := serveWith(h.api, req{method: "POST", path: w.path, body: w.body}, func(hr *http.Request) {
				hr.Body = &brokenBody{r: strings.NewReader(w.body + "  "), err: why}
			})
			if p := problemOf(t, r, http.StatusBadRequest); !strings.Contains(p.Detail, why.Error()) {
				t.Errorf("POST %s whose body breaks off (%v): detail %q", w.path, why, p.Detail)
			}
		}
	}
	if r := h.do(req{method: "POST", path: "/v1/events", body: event + " \n\t\r\n", token: deployerToken}); r.status != http.StatusCreated {
		t.Errorf("append with trailing whitespace: %s", r)
	}
	// Nothing the refused requests asked for happened: o-1 is parked as it
	// was, and only the one good append reached the log.
	if rec, err := h.engine.Parked(t.Context(), notifierSub, "Order", "o-1"); err != nil || len(rec.History) != 2 {
		t.Errorf("o-1 after the refused requests: %+v, %v", rec, err)
	}
	if v, err := h.events.Version(t.Context(), "Order", "o-2"); err != nil || v != 1 {
		t.Errorf("o-2 version %d, %v; want 1 (only the good append)", v, err)
	}
}

// TestBrokenModuleUpload: a module upload whose body breaks off is the
// client's fault: 400, and no module is stored.
func TestBrokenModuleUpload(t *testing.T) {
	t.Parallel()
	h := newHost(t, "")
	wasm := string(notifier(t))
	for _, why := range []error{io.ErrUnexpectedEOF, errors.New("http: malformed chunked encoding")} {
		r := serveWith(h.api, req{method: "PUT", path: "/v1/modules/shipment-notifier", body: wasm, contentType: "application/wasm"},
			func(hr *http.Request) { hr.Body = &brokenBody{r: strings.NewReader(wasm[:len(wasm)/2]), err: why} })
		if p := problemOf(t, r, http.StatusBadRequest); !strings.Contains(p.Detail, why.Error()) {
			t.Errorf("upload broken by %v: detail %q", why, p.Detail)
		}
	}
	if list := h.modules.List(); len(list) != 0 {
		t.Errorf("modules after broken uploads: %+v", list)
	}
}

// TestConsolePaths: the console serves its files; any other path under
// /console — one not valid UTF-8, one climbing out, one it lacks — is a 404
// problem, never the file server's text/plain 500.
func TestConsolePaths(t *testing.T) {
	t.Parallel()
	s := New(Deps{Config: config.Default})
	for _, path := range []string{"/console/", "/console/console.js", "/console/console.css"} {
		if r := serve(s, req{method: "GET", path: path}); r.status != http.StatusOK || len(r.body) == 0 {
			t.Errorf("GET %s: %d", path, r.status)
		}
	}
	for _, path := range []string{"/console/%ff", "/console/%C0%AF", "/console/a%ffb.js", "/console/nope.js", "/console/../server.go",
		"/console/%2e%2e/openapi.json", "/console/console.js/x", "/console//console.js"} {
		r := serve(s, req{method: "GET", path: path})
		problemOf(t, r, http.StatusNotFound)
	}
}
