package api

import (
	"net/http"
	"strings"
	"testing"
)

// TestBodyEncodingsRefused: a body the host would read other than as its
// client wrote it — with a content coding it does not decode, or JSON in
// a charset other than UTF-8 — is a 415 problem saying so, on the routes
// that take a body, and nothing is done; identity and utf-8 pass.
func TestBodyEncodingsRefused(t *testing.T) {
	t.Parallel()
	h := newHost(t, "")
	event := `{"aggregateType":"Order","aggregateId":"o-1","events":[{"type":"A"}]}`
	tests := []struct {
		name   string
		r      req
		header [2]string
		status int
		detail string
	}{
		{"gzip JSON", req{method: "POST", path: "/v1/events", body: event}, [2]string{"Content-Encoding", "gzip"}, 415, "Content-Encoding gzip"},
		{"two codings", req{method: "POST", path: "/v1/events", body: event}, [2]string{"Content-Encoding", "identity, br"}, 415, "Content-Encoding br"},
		{"gzip module", req{method: "PUT", path: "/v1/modules/m", body: string(notifier(t)), contentType: "application/wasm"}, [2]string{"Content-Encoding", "gzip"}, 415, "Content-Encoding gzip"},
		{"UTF-16 JSON", req{method: "POST", path: "/v1/events", body: event, contentType: "application/json; charset=utf-16"}, [2]string{}, 415, "charset utf-16"},
		{"Latin-1 JSON", req{method: "POST", path: "/v1/subscriptions/" + notifierSub + "/reset", body: `{"position":1}`, contentType: "application/json; charset=ISO-8859-1"}, [2]string{}, 415, "charset ISO-8859-1"},
	}
	for _, tt := range tests {
		r := serveWith(h.api, tt.r, func(hr *http.Request) {
			if tt.header[0] != "" {
				hr.Header.Set(tt.header[0], tt.header[1])
			}
		})
		checkResponse(t, h.api, tt.r.method, tt.r.path, r)
		if p := problemOf(t, r, tt.status); !strings.Contains(p.Detail, tt.detail) {
			t.Errorf("%s: detail %q does not say %q", tt.name, p.Detail, tt.detail)
		}
	}
	if v, err := h.events.Version(t.Context(), "Order", "o-1"); err != nil || v != 0 {
		t.Errorf("Order/o-1 at version %d (%v) after refused appends", v, err)
	}
	if len(h.modules.List()) != 0 {
		t.Errorf("a module was stored: %+v", h.modules.List())
	}
	ok := req{method: "POST", path: "/v1/events", body: event, contentType: "application/json; charset=UTF-8"}
	if r := serveWith(h.api, ok, func(hr *http.Request) { hr.Header.Set("Content-Encoding", "identity") }); r.status != http.StatusCreated {
		t.Errorf("append in UTF-8, Content-Encoding identity: %s", r)
	}
}
