package api

import (
	"net/http"
	"testing"
)

// A valid traceparent is kept as sent; a malformed one, or an all-zero id,
// is ignored (W3C: a receiver restarts the trace), never refused.
func TestAppendTraceparent(t *testing.T) {
	const valid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, tt := range []struct{ header, want string }{
		{valid, valid},
		{"", ""},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", ""},
		{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", ""},
		{"not a traceparent", ""},
	} {
		h := http.Header{}
		if tt.header != "" {
			h.Set("traceparent", tt.header)
		}
		if got := appendTraceparent(h); got != tt.want {
			t.Errorf("%q kept as %q, want %q", tt.header, got, tt.want)
		}
	}
}
