package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestArgumentsStartingWithDash: every verb that takes names or ids takes
// one that starts with "-" after "--", flags before it; without "--" such
// an argument is a usage error that says to use it, and nothing is sent.
func TestArgumentsStartingWithDash(t *testing.T) {
	var mu sync.Mutex
	var got []string // escaped paths the server saw
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.EscapedPath())
		mu.Unlock()
		switch {
		case r.Method == http.MethodPost && strings.Contains(r.URL.Path, "/parked/"):
			w.WriteHeader(http.StatusAccepted)
			w.Write([]byte(`{"status":"resuming"}`))
		case strings.Contains(r.URL.Path, "/parked/"):
			w.Write([]byte(`{"subscription":"-S","aggregateType":"-T","aggregateId":"-1","version":1,"state":"waiting","error":{"message":"m"},"history":[]}`))
		case r.Method == http.MethodDelete:
			w.WriteHeader(http.StatusNoContent)
		case strings.HasPrefix(r.URL.Path, "/v1/modules/"):
			w.Write([]byte(`{"name":"-m","sha256":"00","size":1,"processor":"P","kind":"reactor","start":"beginning","handlers":[]}`))
		default:
			w.Write([]byte(`{"name":"-s","state":"running","partitions":[]}`))
		}
	}))
	defer srv.Close()
	tests := []struct {
		args []string
		want string // the request sent
	}{
		{[]string{"parked", "show", "--", "-S", "-T", "-1"}, "GET /v1/subscriptions/-S/parked/-T/-1"},
		{[]string{"parked", "resume", "S", "T", "--", "-1"}, "POST /v1/subscriptions/S/parked/T/-1/resume"},
		{[]string{"parked", "resume", "--reason", "r", "S", "T", "--", "--"}, "POST /v1/subscriptions/S/parked/T/--/resume"},
		{[]string{"parked", "skip", "S", "T", "--through-version", "2", "--", "-1"}, "POST /v1/subscriptions/S/parked/T/-1/skip"},
		{[]string{"--json", "parked", "skip", "S", "--", "-T", "-x=y"}, "POST /v1/subscriptions/S/parked/-T/-x=y/skip"},
		{[]string{"subs", "pause", "--", "-s"}, "POST /v1/subscriptions/-s/pause"},
		{[]string{"subs", "show", "--", "-s"}, "GET /v1/subscriptions/-s"},
		{[]string{"modules", "show", "--", "-m"}, "GET /v1/modules/-m"},
		{[]string{"modules", "rm", "--", "-m"}, "DELETE /v1/modules/-m"},
	}
	for _, tt := range tests {
		mu.Lock()
		got = nil
		mu.Unlock()
		code, out, errOut := runCLI(srv.URL, tt.args...)
		mu.Lock()
		if code != exitOK || len(got) == 0 || got[0] != tt.want {
			t.Errorf("host %s: exit %d, sent %q, want %q\n%s%s", strings.Join(tt.args, " "), code, got, tt.want, out, errOut)
		}
		mu.Unlock()
	}

	for _, args := range [][]string{{"parked", "resume", "S", "T", "-1"}, {"parked", "skip", "S", "T", "-1", "--reason", "r"}, {"subs", "pause", "-s"}} {
		mu.Lock()
		got = nil
		mu.Unlock()
		code, _, errOut := runCLI(srv.URL, args...)
		mu.Lock()
		if code != exitUsage || len(got) != 0 || !strings.Contains(errOut, `goes after "--"`) {
			t.Errorf("host %s: exit %d, sent %q, stderr %q; want a usage error pointing to \"--\"", strings.Join(args, " "), code, got, errOut)
		}
		mu.Unlock()
	}
	// The help says so too.
	for _, args := range [][]string{{"help"}, {"parked", "resume", "-h"}, {"parked"}} {
		_, out, errOut := runCLI(srv.URL, args...)
		if !strings.Contains(out+errOut, `"--"`) {
			t.Errorf("host %s does not tell how to pass an argument that starts with \"-\":\n%s%s", strings.Join(args, " "), out, errOut)
		}
	}
}
