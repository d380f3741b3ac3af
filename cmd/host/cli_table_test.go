package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestLongCellsAreWhole: a long error message is never cut off: it wraps
// under its column, or stays on the row's one line with --wide.
func TestLongCellsAreWhole(t *testing.T) {
	msg := "dial tcp 10.0.0.7:443: connect: connection refused while notifying buyer-42 of order-17 shipped by DHL, attempt five of five"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := map[string]any{"subscription": "P.h", "aggregateType": "Order", "aggregateId": "o-1", "version": 1, "state": "waiting",
			"error": map[string]any{"message": msg, "kind": "recoverable"}, "attempts": 5}
		json.NewEncoder(w).Encode(map[string]any{"records": []any{rec, rec}, "next": ""})
	}))
	defer srv.Close()

	_, wrapped, _ := runCLI(srv.URL, "parked", "list")
	if strings.Contains(wrapped, "…") || tableRows(wrapped) != 3 {
		t.Errorf("want a header and two rows, nothing cut:\n%s", wrapped)
	}
	for _, line := range strings.Split(wrapped, "\n") {
		if len([]rune(line)) > 200 {
			t.Errorf("a line of %d characters, want it wrapped:\n%s", len([]rune(line)), wrapped)
		}
	}
	if got := strings.Join(strings.Fields(wrapped), " "); strings.Count(got, "recoverable: "+msg) != 2 {
		t.Errorf("the message is not whole in each row:\n%s", wrapped)
	}

	_, wide, _ := runCLI(srv.URL, "parked", "list", "--wide")
	if lines := strings.Split(strings.TrimSpace(wide), "\n"); len(lines) != 3 || !strings.Contains(lines[1], "recoverable: "+msg) {
		t.Errorf("--wide: want a header and two whole rows:\n%s", wide)
	}
}

// TestWrap: wrap breaks at spaces, within a word only when it must.
func TestWrap(t *testing.T) {
	tests := []struct {
		s     string
		width int
		want  []string
	}{
		{"short", 10, []string{"short"}},
		{"two words here", 0, []string{"two words here"}},
		{"aaa bbb ccc", 7, []string{"aaa bbb", "ccc"}},
		{"aaaaaaaaaa b", 4, []string{"aaaa", "aaaa", "aa b"}},
		{"ééé ééé", 3, []string{"ééé", "ééé"}},
	}
	for _, tt := range tests {
		if got := wrap(tt.s, tt.width); strings.Join(got, "|") != strings.Join(tt.want, "|") {
			t.Errorf("wrap(%q, %d) = %q, want %q", tt.s, tt.width, got, tt.want)
		}
	}
}

// TestReason: resume and skip without --reason send none and say so; a
// blank --reason is a usage error and nothing is sent.
func TestReason(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
		w.Write([]byte(`{"status":"resuming"}`))
	}))
	defer srv.Close()
	tests := []struct {
		args []string
		code int
		out  string
		sent string // the body sent; "" for nothing
	}{
		{[]string{"parked", "resume", "S", "T", "I"}, exitOK, "no reason recorded: --reason R keeps one", `{}`},
		{[]string{"parked", "skip", "S", "T", "I", "--reason", "looked at it"}, exitOK, "(reason: looked at it)", `{"reason":"looked at it"}`},
		{[]string{"parked", "resume", "S", "T", "I", "--reason", ""}, exitUsage, "--reason is blank: say why", ""},
		{[]string{"parked", "skip", "S", "T", "I", "--reason=  "}, exitUsage, "--reason is blank", ""},
	}
	for _, tt := range tests {
		mu.Lock()
		bodies = nil
		mu.Unlock()
		code, out, errOut := runCLI(srv.URL, tt.args...)
		mu.Lock()
		sent := strings.Join(bodies, "")
		mu.Unlock()
		if code != tt.code || !strings.Contains(out+errOut, tt.out) || strings.TrimSpace(sent) != tt.sent {
			t.Errorf("berth %s: exit %d, want %d; sent %q, want %q; output %q, want %q", strings.Join(tt.args, " "), code, tt.code, sent, tt.sent, out+errOut, tt.out)
		}
	}
}
