package main

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/berthhq/berth/internal/buildinfo"
)

// recorder is a fake host that records the requests it gets and answers
// each with status and body.
type recorder struct {
	mu       sync.Mutex
	requests []*http.Request
	srv      *httptest.Server
}

func newRecorder(t *testing.T, status int, body string) *recorder {
	r := &recorder{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.requests = append(r.requests, req)
		r.mu.Unlock()
		if status >= 400 {
			w.Header().Set("Content-Type", "application/problem+json")
		}
		w.WriteHeader(status)
		w.Write([]byte(body))
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// sent returns the requests so far and forgets them.
func (r *recorder) sent() []*http.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	got := r.requests
	r.requests = nil
	return got
}

func runEnv(env map[string]string, args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, &out, &errb, func(k string) string { return env[k] })
	return code, out.String(), errb.String()
}

// TestServerAndToken: --server and $BERTH_SERVER take host:port as well as
// a URL, --server wins; the token comes from --token-file, else
// $BERTH_TOKEN; a token file that cannot be used is a usage error and
// nothing is sent.
func TestServerAndToken(t *testing.T) {
	rec := newRecorder(t, 200, `{"modules":[]}`)
	hostPort := strings.TrimPrefix(rec.srv.URL, "http://")
	dir := t.TempDir()
	tokenFile, emptyFile := filepath.Join(dir, "token"), filepath.Join(dir, "empty")
	if err := os.WriteFile(tokenFile, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(emptyFile, []byte(" \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	unused := "127.0.0.1:1" // nothing may be sent there
	tests := []struct {
		name string
		env  map[string]string
		args []string
		code int
		auth string // the Authorization sent; "-" when nothing may be sent
		err  string
	}{
		{"--server host:port", nil, []string{"--server", hostPort, "modules", "list"}, exitOK, "", ""},
		{"--server after the verb", nil, []string{"modules", "list", "--server=" + hostPort}, exitOK, "", ""},
		{"--server URL", nil, []string{"--server", rec.srv.URL, "modules", "list"}, exitOK, "", ""},
		{"$BERTH_SERVER host:port", map[string]string{"BERTH_SERVER": hostPort}, []string{"modules", "list"}, exitOK, "", ""},
		{"--server over $BERTH_SERVER", map[string]string{"BERTH_SERVER": unused}, []string{"--server", hostPort, "modules", "list"}, exitOK, "", ""},
		{"$BERTH_TOKEN", map[string]string{"BERTH_SERVER": hostPort, "BERTH_TOKEN": "from-env"}, []string{"modules", "list"}, exitOK, "Bearer from-env", ""},
		{"--token-file over $BERTH_TOKEN", map[string]string{"BERTH_SERVER": hostPort, "BERTH_TOKEN": "from-env"}, []string{"modules", "list", "--token-file", tokenFile}, exitOK, "Bearer from-file", ""},
		{"--token-file missing", map[string]string{"BERTH_SERVER": hostPort}, []string{"modules", "list", "--token-file", filepath.Join(dir, "nope")}, exitUsage, "-", "--token-file: open"},
		{"--token-file empty", map[string]string{"BERTH_SERVER": hostPort}, []string{"modules", "list", "--token-file", emptyFile}, exitUsage, "-", "must hold one token on one line"},
		{"--server not a URL", nil, []string{"--server", "ftp://" + hostPort, "modules", "list"}, exitUsage, "-", "must be an http:// or https:// URL with a host, or host:port"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runEnv(tt.env, tt.args...)
			got := rec.sent()
			if code != tt.code || !strings.Contains(errOut, tt.err) {
				t.Fatalf("exit %d, want %d; stderr %q, want %q\n%s", code, tt.code, errOut, tt.err, out)
			}
			switch {
			case tt.auth == "-" && len(got) != 0:
				t.Errorf("sent %d requests, want none", len(got))
			case tt.auth != "-" && (len(got) != 1 || got[0].Header.Get("Authorization") != tt.auth):
				t.Errorf("sent %d requests; want one with Authorization %q", len(got), tt.auth)
			}
		})
	}
}

// TestExitCodes: each kind of outcome has its documented exit code.
func TestExitCodes(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	problem := func(status int, detail string) *recorder {
		return newRecorder(t, status, fmt.Sprintf(`{"type":"https://berth.dev/problems/x","title":%q,"status":%d,"detail":%q}`, http.StatusText(status), status, detail))
	}
	typed := func(status int, kind, detail string) *recorder {
		return newRecorder(t, status, fmt.Sprintf(`{"type":"https://berth.dev/problems/%s","title":%q,"status":%d,"detail":%q}`, kind, http.StatusText(status), status, detail))
	}
	tests := []struct {
		name   string
		server string
		args   []string
		code   int
		stderr string
	}{
		{"done", newRecorder(t, 200, `{"modules":[]}`).srv.URL, []string{"modules", "list"}, exitOK, ""},
		{"refused", problem(409, "version conflict").srv.URL, []string{"subs", "pause", "S"}, exitFailed, "Conflict (409): version conflict"},
		{"failed", problem(500, "boom").srv.URL, []string{"subs", "pause", "S"}, exitFailed, "Internal Server Error (500): boom"},
		{"usage", dead, []string{"subs", "pause"}, exitUsage, "want 1 argument(s), got 0"},
		{"unreachable", dead, []string{"subs", "pause", "S"}, exitUnreachable, "cannot reach the server at http://" + dead},
		{"not found", problem(404, `unknown subscription "S"`).srv.URL, []string{"subs", "pause", "S"}, exitNotFound, `Not Found (404): unknown subscription "S"`},
		{"unavailable", typed(503, "nats-unavailable", "NATS did not answer within 2s").srv.URL, []string{"subs", "pause", "S"}, exitUnavailable, "Service Unavailable (503): NATS did not answer"},
		{"a proxy's 503", newRecorder(t, 503, "upstream connect error").srv.URL, []string{"subs", "pause", "S"}, exitUnavailable, "Service Unavailable (503): upstream connect error"},
		{"by its type, not its status", typed(502, "not-found", `unknown subscription "S"`).srv.URL, []string{"subs", "pause", "S"}, exitNotFound, `unknown subscription "S"`},
		{"config has problems", dead, []string{"config", "check", writeTemp(t, "bad.toml", "[server]\nlisten = 7\n")}, exitFailed, "bad.toml:2: server.listen"},
		{"config cannot be read", dead, []string{"config", "check", filepath.Join(t.TempDir(), "none.toml")}, exitUsage, "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errOut := runCLI(tt.server, tt.args...)
			if code != tt.code || !strings.Contains(errOut, tt.stderr) {
				t.Errorf("berth %s: exit %d, want %d; stderr %q, want %q", strings.Join(tt.args, " "), code, tt.code, errOut, tt.stderr)
			}
		})
	}
	// The codes are documented where a user looks.
	_, out, _ := runCLI("", "help", "exit-codes")
	for _, want := range []string{"0  done", "1  the server refused", "2  usage error", "3  cannot reach the server", "4  not found", "5  unavailable for now", "berth serve exits"} {
		if !strings.Contains(out, want) {
			t.Errorf("berth help exit-codes lacks %q:\n%s", want, out)
		}
	}
}

func writeTemp(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestConfigCheck: config check reads a file as serve does and names the
// line and key of each problem, offline.
func TestConfigCheck(t *testing.T) {
	tests := []struct {
		name, text string
		code       int
		stdout     string
		stderr     []string
	}{
		{"empty", "", exitOK, "good.toml: valid", nil},
		{"the commented default", "[subscription.retry]\nmax-attempts = 7\n", exitOK, "good.toml: valid", nil},
		{"unknown key", "[subscription.retry]\nmax-atempts = 3\n", exitFailed, "",
			[]string{"good.toml:2: unknown key subscription.retry.max-atempts (did you mean max-attempts?)", "1 problem"}},
		{"two problems", "[subscription.retry]\nmax-attempts = 3\ninitial-backoff = \"2 parsecs\"\n[server]\nlisten = 7\n", exitFailed, "",
			[]string{"good.toml:3: subscription.retry.initial-backoff", "good.toml:5: server.listen", "2 problems"}},
		{"syntax", "[server\n", exitFailed, "", []string{"good.toml:2: expected", "1 problem"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runCLI("", "config", "check", writeTemp(t, "good.toml", tt.text))
			if code != tt.code || !strings.Contains(out, tt.stdout) {
				t.Errorf("exit %d, want %d; stdout %q, want %q; stderr %q", code, tt.code, out, tt.stdout, errOut)
			}
			for _, w := range tt.stderr {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut)
				}
			}
		})
	}
}

// TestVersion: version prints the build as the toolchain recorded it.
func TestVersion(t *testing.T) {
	code, out, errOut := runCLI("", "version")
	for _, want := range []string{"version:", "revision:", "go:", runtime.Version()} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Errorf("version: exit %d, lacks %q\n%s%s", code, want, out, errOut)
		}
	}
	tests := []struct {
		info buildinfo.Info
		want []string
	}{
		{buildinfo.Info{Version: "v1.2.3", Revision: "82d5e46", Time: "2026-05-01T10:00:00Z", GoVersion: "go1.26.0"},
			[]string{"version:    v1.2.3\n", "revision:   82d5e46\n", "committed:  2026-05-01T10:00:00Z\n", "go:         go1.26.0\n"}},
		{buildinfo.Info{Version: "(devel)", Revision: "82d5e46", Modified: true, GoVersion: "go1.26.0"},
			[]string{"(devel)", "82d5e46 (modified)"}},
		{buildinfo.Info{Version: buildinfo.Unknown, Revision: buildinfo.Unknown, GoVersion: "go1.26.0"},
			[]string{"version:   unknown", "revision:  unknown"}},
	}
	for _, tt := range tests {
		var out bytes.Buffer
		if err := printVersion(&app{stdout: &out}, tt.info); err != nil {
			t.Fatal(err)
		}
		for _, w := range tt.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%+v: lacks %q:\n%s", tt.info, w, out.String())
			}
		}
	}
}
