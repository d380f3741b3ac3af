package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/berthhq/berth/api/wire"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/internal/testing/testbuild"
)

// The tests drive cli in-process against a real host: TestMain builds this
// command, starts `host serve` on a free port with a config that parks the
// ShipmentNotifier at its first failure, and stops it with SIGTERM at the end.
var (
	hostURL    string // the running host, e.g. http://127.0.0.1:PORT
	sampleWasm string // the ShipmentNotifier sample, built for wasip1
)

const sub = "ShipmentNotifier.onOrderShipped"

// testConfig makes every failure of the sample park at once; the long-horizon
// retries stay at their default (the first one after 3m), so a parked
// aggregate stays "retrying" for the whole test. The outage detector is
// raised out of reach: a few orders failing together in one partition must
// park, not pause the partition.
const testConfig = `[subscription.systemic]
aggregates = 1000

[subscriptions."ShipmentNotifier.onOrderShipped".retry]
max-attempts = 1
`

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "berth-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	root, err := testbuild.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	bin := filepath.Join(dir, "host")
	build := exec.Command("go", "build", "-o", bin, "./cmd/host")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build the host: %v\n%s", err, out)
		return 1
	}
	if sampleWasm, err = testbuild.Wasm(dir, "samples/shipment-notifier"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cfg := filepath.Join(dir, "berth.toml")
	if err := os.WriteFile(cfg, []byte(testConfig), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	logs := &hostLog{serving: make(chan string, 1)}
	host := exec.Command(bin, "serve", "--data", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0", "--config", cfg)
	host.Stdout, host.Stderr = logs, logs
	if err := host.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "start the host:", err)
		return 1
	}
	exited := make(chan error, 1)
	go func() { exited <- host.Wait() }()
	select {
	case hostURL = <-logs.serving:
	case err := <-exited:
		fmt.Fprintf(os.Stderr, "the host exited before serving: %v\n%s", err, logs.String())
		return 1
	case <-time.After(60 * time.Second):
		host.Process.Kill()
		<-exited
		fmt.Fprintf(os.Stderr, "the host did not serve within 60s\n%s", logs.String())
		return 1
	}

	code := m.Run()

	if err := host.Process.Signal(syscall.SIGTERM); err != nil {
		fmt.Fprintln(os.Stderr, "SIGTERM the host:", err)
		code = 1
	}
	select {
	case err := <-exited:
		if err != nil {
			fmt.Fprintf(os.Stderr, "the host exited badly after SIGTERM: %v\n", err)
			code = 1
		}
	case <-time.After(30 * time.Second):
		host.Process.Kill()
		<-exited
		fmt.Fprintln(os.Stderr, "the host did not exit within 30s of SIGTERM")
		code = 1
	}
	if code != 0 {
		fmt.Fprintf(os.Stderr, "--- host log ---\n%s", logs.String())
	}
	return code
}

// hostLog keeps the host's log and reports the URL of its "berth is
// serving" line.
type hostLog struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	serving chan string
	found   bool
}

var servingLine = regexp.MustCompile(`msg="berth is serving" url=(http://\S+)`)

// Write keeps p and looks for the serving line.
func (l *hostLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	if !l.found {
		if m := servingLine.FindSubmatch(l.buf.Bytes()); m != nil {
			l.found = true
			l.serving <- string(m[1])
		}
	}
	return len(p), nil
}

// String returns the log so far.
func (l *hostLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// runCLI runs a command line as main does, with BERTH_SERVER pointing at
// server (the test host when empty).
func runCLI(server string, args ...string) (code int, stdout, stderr string) {
	if server == "" {
		server = hostURL
	}
	env := func(k string) string {
		if k == "BERTH_SERVER" {
			return server
		}
		return ""
	}
	var out, errb bytes.Buffer
	code = run(args, &out, &errb, env)
	return code, out.String(), errb.String()
}

// step is one command line and what it must do.
type step struct {
	name   string
	args   []string
	code   int
	stdout []string                                  // substrings of stdout
	stderr []string                                  // substrings of stderr
	poll   bool                                      // repeat until it passes, up to a deadline
	check  func(t *testing.T, stdout, stderr string) // more checks, e.g. of --json output
}

func (s step) failures(code int, stdout, stderr string) []string {
	var bad []string
	if code != s.code {
		bad = append(bad, fmt.Sprintf("exit code %d, want %d", code, s.code))
	}
	for _, w := range s.stdout {
		if !strings.Contains(stdout, w) {
			bad = append(bad, fmt.Sprintf("stdout lacks %q", w))
		}
	}
	for _, w := range s.stderr {
		if !strings.Contains(stderr, w) {
			bad = append(bad, fmt.Sprintf("stderr lacks %q", w))
		}
	}
	return bad
}

func (s step) run(t *testing.T, server string) {
	t.Helper()
	var stdout, stderr string
	attempt := func() error {
		var code int
		code, stdout, stderr = runCLI(server, s.args...)
		if bad := s.failures(code, stdout, stderr); len(bad) > 0 {
			return fmt.Errorf("host %s:\n%s\n--- stdout ---\n%s--- stderr ---\n%s", strings.Join(s.args, " "), strings.Join(bad, "\n"), stdout, stderr)
		}
		return nil
	}
	if s.poll {
		checkfor.Nil(t, 20*time.Second, 50*time.Millisecond, attempt)
	} else if err := attempt(); err != nil {
		t.Fatal(err)
	}
	if s.check != nil {
		s.check(t, stdout, stderr)
	}
}

// tableRows counts the rows of a table: a wrapped cell goes on over lines
// that start with spaces, under its column.
func tableRows(out string) int {
	n := 0
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if line != "" && !strings.HasPrefix(line, " ") {
			n++
		}
	}
	return n
}

func decodeJSON[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, s)
	}
	return v
}

// decodeStrict decodes s into a T, failing on a field T does not have.
func decodeStrict[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("not a %T: %v\n%s", v, err, s)
	}
	return v
}

// TestOperatorStory uploads the ShipmentNotifier, parks a shipped order,
// inspects and skips it, resumes another, and pauses the subscription; steps
// run in order against the one host.
func TestOperatorStory(t *testing.T) {
	id := fmt.Sprintf("order-%d", time.Now().UnixNano()) // unique under -count=N
	id2, id3, id4 := id+"-b", id+"-c", id+"-d"
	body := filepath.Join(t.TempDir(), "events.json")
	if err := os.WriteFile(body, []byte(`{"aggregateType":"Invoice","aggregateId":"`+id+`","events":[{"type":"InvoiceSent","data":{"n":1}}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	steps := []step{
		{name: "push", args: []string{"modules", "push", "shipment-notifier", sampleWasm}, stdout: []string{"module shipment-notifier", "processor:", "ShipmentNotifier", sub}},
		{name: "list modules", args: []string{"modules", "list"}, stdout: []string{"NAME", "SHA256", "shipment-notifier", "reactor", sub}},
		{name: "list modules json", args: []string{"modules", "list", "--json"}, check: func(t *testing.T, stdout, _ string) {
			list := decodeJSON[struct {
				Modules []struct{ Name, SHA256 string }
			}](t, stdout)
			if len(list.Modules) != 1 || list.Modules[0].Name != "shipment-notifier" || len(list.Modules[0].SHA256) != 64 {
				t.Errorf("modules = %+v", list.Modules)
			}
		}},
		{name: "show module", args: []string{"modules", "show", "shipment-notifier"}, stdout: []string{"sha256:", "onOrderShipped", "OrderShipped"}},
		{name: "append", args: []string{"events", "append", "--type", "Order", "--id", id, "--owner", "buyer-42", `OrderShipped={"carrier":"dhl"}`},
			stdout: []string{"appended to Order/" + id, "version 1"}},
		{name: "parked appears", poll: true, args: []string{"parked", "list", "--subscription", sub},
			stdout: []string{"SUBSCRIPTION", "STOPPED AT", "NEXT RETRY", "Order/" + id, "retrying", "no notifications-url configured"}},
		{name: "parked list json", args: []string{"--json", "parked", "list", "--aggregate-type", "Order", "--state", "retrying"}, check: func(t *testing.T, stdout, _ string) {
			page := decodeJSON[struct {
				Records []wire.ParkedRecord
				Next    *string
			}](t, stdout)
			if page.Next == nil {
				t.Error("the server's next cursor is missing from --json")
			}
			for _, r := range page.Records {
				if r.AggregateID == id {
					if r.Attempts != 1 || r.Version != 1 || r.State != wire.StateRetrying {
						t.Errorf("record = %+v, want 1 attempt at version 1, retrying", r)
					}
					return
				}
			}
			t.Errorf("%s not in %s", id, stdout)
		}},
		{name: "show parked", args: []string{"parked", "show", sub, "Order", id},
			stdout: []string{"aggregate:", "Order/" + id, "stopped at:", "version 1", "invocation key:", sub + ":Order/" + id + "@1:0", "event:", "OrderShipped", "held back:", "0 later commit(s)", "next retry:", "error classes:", "Notification", "history:", "attempt", "parked"}},
		{name: "show parked json", args: []string{"parked", "show", sub, "Order", id, "--json"}, check: func(t *testing.T, stdout, _ string) {
			r := decodeJSON[wire.ParkedRecord](t, stdout)
			if r.Subscription != sub || r.AggregateID != id || len(r.History) == 0 {
				t.Errorf("record = %+v", r)
			}
		}},
		// What the host answers decodes into the API's own types with no
		// field left over: the CLI and the host share one description.
		{name: "answers are wire types", args: []string{"parked", "show", sub, "Order", id, "--json"}, check: func(t *testing.T, stdout, _ string) {
			d := decodeStrict[wire.ParkedRecordDetail](t, stdout)
			if d.AggregateID != id || d.InvocationKey != sub+":Order/"+id+"@1:0" || d.Event == nil || d.Event.Type != "OrderShipped" ||
				d.Error.Class == "" || d.Error.Reason == "" || len(d.History) == 0 {
				t.Errorf("detail = %+v", d)
			}
			for _, c := range []struct {
				args   []string
				decode func(*testing.T, string)
			}{
				{[]string{"parked", "list"}, func(t *testing.T, s string) { decodeStrict[wire.ParkedPage](t, s) }},
				{[]string{"subs", "list"}, func(t *testing.T, s string) { decodeStrict[wire.SubscriptionList](t, s) }},
				{[]string{"subs", "show", sub}, func(t *testing.T, s string) { decodeStrict[wire.Subscription](t, s) }},
				{[]string{"modules", "list"}, func(t *testing.T, s string) { decodeStrict[wire.ModuleList](t, s) }},
				{[]string{"modules", "show", "shipment-notifier"}, func(t *testing.T, s string) { decodeStrict[wire.ModuleInfo](t, s) }},
			} {
				code, out, errs := runCLI("", append(c.args, "--json")...)
				if code != exitOK {
					t.Fatalf("host %s --json: exit %d\n%s", strings.Join(c.args, " "), code, errs)
				}
				c.decode(t, out)
			}
		}},
		{name: "show sub", args: []string{"subs", "show", sub},
			stdout: []string{"module:", "shipment-notifier", "retry:", "max-attempts", "override", "partitions:"}},
		{name: "skip", args: []string{"parked", "skip", sub, "Order", id, "--reason", "no notification service in tests"},
			stdout: []string{"skipped Order/" + id, "reason: no notification service in tests"}},
		{name: "skip again", args: []string{"parked", "skip", sub, "Order", id}, code: exitNotFound,
			stderr: []string{"Not Found (404)", "not parked"}},
		{name: "skip again json", args: []string{"parked", "skip", "--json", sub, "Order", id}, code: exitNotFound, check: func(t *testing.T, _, stderr string) {
			p := decodeJSON[wire.Problem](t, stderr)
			if p.Status != 404 || !strings.Contains(p.Detail, "not parked") {
				t.Errorf("problem = %+v", p)
			}
		}},
		{name: "show skipped", args: []string{"parked", "show", sub, "Order", id}, code: exitNotFound, stderr: []string{"not parked"}},
		{name: "append another", args: []string{"events", "append", "--type", "Order", "--id", id2, "--owner", "buyer-7", "OrderShipped={}"},
			stdout: []string{"appended to Order/" + id2}},
		{name: "another parks", poll: true, args: []string{"parked", "list"}, stdout: []string{"Order/" + id2}},
		{name: "resume", args: []string{"parked", "resume", sub, "Order", id2, "--reason", "try again"},
			stdout: []string{"resumed Order/" + id2, "reason: try again"}},
		{name: "append a third", args: []string{"events", "append", "--type", "Order", "--id", id3, "--owner", "buyer-9", "OrderShipped={}"},
			stdout: []string{"appended to Order/" + id3}},
		{name: "append a fourth", args: []string{"events", "append", "--type", "Order", "--id", id4, "--owner", "buyer-9", "OrderShipped={}"},
			stdout: []string{"appended to Order/" + id4}},
		{name: "both park", poll: true, args: []string{"parked", "list", "--aggregate-type", "Order"}, stdout: []string{"Order/" + id3, "Order/" + id4}},
		{name: "one page", poll: true, args: []string{"parked", "list", "--limit", "1"}, stderr: []string{"more records: berth parked list --after "},
			check: func(t *testing.T, stdout, stderr string) {
				if rows := tableRows(stdout) - 1; rows != 1 {
					t.Errorf("--limit 1 printed %d rows:\n%s", rows, stdout)
				}
				cursor := strings.Fields(stderr[strings.Index(stderr, "--after "):])[1]
				code, next, errs := runCLI("", "parked", "list", "--limit", "1", "--after", cursor)
				if code != exitOK || tableRows(next) != 2 || next == stdout {
					t.Errorf("the next page: code %d\n%s%s", code, next, errs)
				}
			}},
		{name: "version conflict", args: []string{"events", "append", "--type", "Order", "--id", id, "--expected-version", "0", "OrderShipped={}"},
			code: exitFailed, stderr: []string{"Conflict (409)", "version conflict"}},
		{name: "append from file", args: []string{"events", "append", "--file", body}, stdout: []string{"appended to Invoice/" + id, "version 1"}},
		{name: "pause", args: []string{"subs", "pause", sub}, stdout: []string{"paused subscription " + sub, "it is now paused"}},
		{name: "list subs paused", args: []string{"subs", "list"}, stdout: []string{"NAME", "LAG", "RETRYING", sub, "paused"}},
		{name: "list subs json", args: []string{"subs", "list", "--json"}, check: func(t *testing.T, stdout, _ string) {
			list := decodeJSON[struct{ Subscriptions []wire.Subscription }](t, stdout)
			if len(list.Subscriptions) != 1 || list.Subscriptions[0].State != "paused" {
				t.Errorf("subscriptions = %+v", list.Subscriptions)
			}
		}},
		{name: "unpause", args: []string{"subs", "unpause", sub}, stdout: []string{"unpaused subscription " + sub, "it is now running"}},
		{name: "unknown module", args: []string{"modules", "show", "no-such-module"}, code: exitNotFound, stderr: []string{"Not Found (404)", `no module named "no-such-module"`}},
		{name: "rm unknown module", args: []string{"modules", "rm", "no-such-module"}, code: exitNotFound, stderr: []string{"no module named"}},
		{name: "unknown subscription", args: []string{"subs", "pause", "Nope.nope"}, code: exitNotFound, stderr: []string{`unknown subscription "Nope.nope"`}},
		// The server names the nearest subscription it has; the CLI prints it.
		{name: "misspelt subscription", args: []string{"subscriptions", "show", "ShipmentNotifier.onOrderShiped"}, code: exitNotFound,
			stderr: []string{`unknown subscription "ShipmentNotifier.onOrderShiped"; did you mean "` + sub + `"?`}},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) { s.run(t, "") })
		if t.Failed() {
			return // later steps depend on this one
		}
	}
}

// TestUsageErrors: a bad command line exits 2 and sends nothing; help exits 0.
func TestUsageErrors(t *testing.T) {
	tests := []step{
		{name: "no args", args: nil, code: exitUsage, stderr: []string{"Usage:"}},
		{name: "help", args: []string{"help"}, stdout: []string{"Exit codes:", "3 cannot reach the server"}},
		{name: "verb help", args: []string{"parked", "skip", "-h"}, stdout: []string{"Usage:\n  berth parked skip SUB TYPE ID [flags]", "--through-version N", "--server HOST:PORT"}},
		{name: "noun help", args: []string{"subs", "--help"}, stdout: []string{"berth subscriptions [command]", "reset", "Aliases:\n  subscriptions, subs"}},
		{name: "unknown command", args: []string{"frobnicate"}, code: exitUsage, stderr: []string{`unknown command "frobnicate"`}},
		{name: "missing verb", args: []string{"parked"}, code: exitUsage, stderr: []string{"missing verb", "capsule, groups, list, replay, resolved, resume, show, skip"}},
		{name: "unknown verb", args: []string{"modules", "delete", "x"}, code: exitUsage, stderr: []string{`unknown verb "delete"`}},
		{name: "unknown flag", args: []string{"parked", "list", "--bogus"}, code: exitUsage, stderr: []string{"unknown flag: --bogus", "usage: berth parked list"}},
		{name: "flag of another verb", args: []string{"parked", "resume", "S", "T", "I", "--through-version", "3"}, code: exitUsage, stderr: []string{"unknown flag: --through-version"}},
		{name: "missing args", args: []string{"parked", "show", "S"}, code: exitUsage, stderr: []string{"want 3 argument(s), got 1"}},
		{name: "extra args", args: []string{"modules", "list", "x"}, code: exitUsage, stderr: []string{"want 0 argument(s), got 1"}},
		{name: "bad state", args: []string{"parked", "list", "--state", "asleep"}, code: exitUsage, stderr: []string{"--state must be retrying, waiting or resuming"}},
		{name: "bad through-version", args: []string{"parked", "skip", "S", "T", "I", "--through-version", "-1"}, code: exitUsage, stderr: []string{`invalid argument "-1" for "--through-version"`}},
		{name: "reset without position", args: []string{"subs", "reset", "S"}, code: exitUsage, stderr: []string{"--position is required"}},
		{name: "bad position", args: []string{"subs", "reset", "S", "--position", "x"}, code: exitUsage, stderr: []string{"must be a whole number"}},
		{name: "append without type", args: []string{"events", "append", "--id", "x", "T={}"}, code: exitUsage, stderr: []string{"--type and --id are required"}},
		{name: "append without events", args: []string{"events", "append", "--type", "A", "--id", "x"}, code: exitUsage, stderr: []string{"at least one event"}},
		{name: "append bad JSON", args: []string{"events", "append", "--type", "A", "--id", "x", "T={bad"}, code: exitUsage, stderr: []string{"not valid JSON"}},
		{name: "append empty type", args: []string{"events", "append", "--type", "A", "--id", "x", "={}"}, code: exitUsage, stderr: []string{"event type is empty"}},
		{name: "append bad expected version", args: []string{"events", "append", "--type", "A", "--id", "x", "--expected-version", "-2", "T={}"}, code: exitUsage, stderr: []string{`invalid argument "-2" for "--expected-version"`, "must be a whole number"}},
		{name: "expected version out of range", args: []string{"events", "append", "--type", "A", "--id", "x", "--expected-version", "9223372036854775808", "T={}"}, code: exitUsage, stderr: []string{"--expected-version 9223372036854775808 is out of range"}},
		{name: "file and flags", args: []string{"events", "append", "--file", "f.json", "--type", "A"}, code: exitUsage, stderr: []string{"--file holds the whole request"}},
		{name: "missing file", args: []string{"events", "append", "--file", "/nonexistent/events.json"}, code: exitUsage, stderr: []string{"no such file"}},
		{name: "missing module file", args: []string{"modules", "push", "m", "/nonexistent/m.wasm"}, code: exitUsage, stderr: []string{"no such file"}},
		{name: "bad server", args: []string{"modules", "list", "--server", "ftp://example.com"}, code: exitUsage, stderr: []string{"must be an http:// or https:// URL"}},
		{name: "bad timeout", args: []string{"modules", "list", "--timeout", "0s"}, code: exitUsage, stderr: []string{"--timeout must be more than 0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, "") })
	}
}

// TestUnreachable: no answer from the server exits 3.
func TestUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	tests := []step{
		{name: "list", args: []string{"modules", "list"}},
		{name: "skip json", args: []string{"parked", "skip", "--json", sub, "Order", "o-1"}},
		{name: "flag before noun", args: []string{"--server", dead, "subs", "list"}},
	}
	for _, tt := range tests {
		tt.code, tt.stderr = exitUnreachable, []string{"cannot reach the server at " + dead}
		t.Run(tt.name, func(t *testing.T) { tt.run(t, dead) })
	}
}

// TestEnvAndToken: $BERTH_SERVER and $BERTH_TOKEN reach the request, and an
// answer that is not a problem document still exits 1 with what it said.
func TestEnvAndToken(t *testing.T) {
	var mu sync.Mutex
	var gotAuth, gotPath string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		gotAuth, gotPath = r.Header.Get("Authorization"), r.URL.RequestURI()
		mu.Unlock()
		if r.URL.Path == "/prefix/v1/modules" {
			w.Write([]byte(`{"modules":[]}`))
			return
		}
		http.Error(w, "bad gateway from a proxy", http.StatusBadGateway)
	}))
	defer srv.Close()
	env := func(k string) string {
		return map[string]string{"BERTH_SERVER": srv.URL + "/prefix/", "BERTH_TOKEN": "s3cret"}[k]
	}
	var out, errb bytes.Buffer
	if code := run([]string{"modules", "list"}, &out, &errb, env); code != exitOK || !strings.Contains(out.String(), "no modules deployed") {
		t.Fatalf("code %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
	mu.Lock()
	if gotAuth != "Bearer s3cret" || gotPath != "/prefix/v1/modules" {
		t.Errorf("Authorization %q, path %q", gotAuth, gotPath)
	}
	mu.Unlock()
	out.Reset()
	errb.Reset()
	code := run([]string{"parked", "list", "--subscription", "A.b c", "--limit", "5"}, &out, &errb, env)
	if code != exitFailed || !strings.Contains(errb.String(), "Bad Gateway (502): bad gateway from a proxy") {
		t.Errorf("code %d, stderr %q", code, errb.String())
	}
	mu.Lock()
	if gotPath != "/prefix/v1/parked?limit=5&subscription=A.b+c" {
		t.Errorf("path %q", gotPath)
	}
	mu.Unlock()
}

func TestHelpers(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct{ got, want string }{
		{truncate("short", 10), "short"},
		{truncate("exactly10!", 10), "exactly10!"},
		{truncate("a longer message", 8), "a longe…"},
		{truncate("line\nbreak\ttab", 20), "line break tab"},
		{truncate("ééééé", 4), "ééé…"},
		{relative(now.Add(179500*time.Millisecond), now), "in 3m0s"},
		{relative(now.Add(-3*time.Second), now), "3s ago"},
		{relative(now, now), "now"},
		{relative(time.Time{}, now), "-"},
		{byteSize(512), "512 B"},
		{byteSize(2994925), "2.9 MiB"},
		{shortHash("c1ea6e0b96f134d4e0714f5f"), "c1ea6e0b96f1"},
		{settingValue([]any{}), "none"},
		{settingValue([]any{"A", "B"}), "A, B"},
		{settingValue(float64(5)), "5"},
	}
	for i, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%d: got %q, want %q", i, tt.got, tt.want)
		}
	}

}
