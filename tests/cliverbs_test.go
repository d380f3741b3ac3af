package tests

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berthhq/berth/config"
)

// berth runs the built binary with args and env (KEY=VALUE) only added to
// an environment that names no server or token, and returns its stdout,
// stderr and exit code.
func berth(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	return berthWith(t, env, "", args...)
}

// berthWith is berth with stdin, where a confirmation is read.
func berthWith(t *testing.T, env []string, stdin string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(hostBin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "BERTH_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return stdout.String(), stderr.String(), ee.ExitCode()
	case err != nil:
		t.Fatalf("run berth %v: %v", args, err)
	}
	return stdout.String(), stderr.String(), 0
}

// TestVersionThroughTheBinary: the binary's version verb and a running
// host's berth_build_info metric say the same build.
func TestVersionThroughTheBinary(t *testing.T) {
	out, errOut, code := berth(t, nil, "version")
	if code != 0 {
		t.Fatalf("berth version: exit %d\n%s", code, errOut)
	}
	fields := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		k, v, _ := strings.Cut(line, ":")
		fields[k] = strings.TrimSpace(v)
	}
	if fields["version"] == "" || fields["revision"] == "" || !strings.HasPrefix(fields["go"], "go1.") {
		t.Fatalf("berth version printed %q", out)
	}
	h := newHost(t, hostConfig{})
	revision, _, _ := strings.Cut(fields["revision"], " (modified)")
	series := fmt.Sprintf(`berth_build_info{goversion=%q,revision=%q,version=%q}`, fields["go"], revision, fields["version"])
	if v := h.mustMetric(series); v != 1 {
		t.Errorf("%s = %v, want 1", series, v)
	}
}

// TestConfigCheckThroughTheBinary: config check passes the commented
// default file the first start writes, and names each problem of a bad
// file by line and key, exiting 1; it needs no host.
func TestConfigCheckThroughTheBinary(t *testing.T) {
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "berth.toml"), filepath.Join(dir, "bad.toml")
	writeFile(t, good, string(config.DefaultTOML()))
	writeFile(t, bad, "[subscription.retry]\nmax-atempts = 3\ninitial-backoff = \"2 parsecs\"\n")
	if out, errOut, code := berth(t, nil, "config", "check", good); code != 0 || !strings.Contains(out, "berth.toml: valid") {
		t.Errorf("config check of the default file: exit %d\n%s%s", code, out, errOut)
	}
	_, errOut, code := berth(t, nil, "config", "check", bad)
	for _, want := range []string{"bad.toml:2: unknown key subscription.retry.max-atempts (did you mean max-attempts?)",
		"bad.toml:3: subscription.retry.initial-backoff", "2 problems"} {
		if code != 1 || !strings.Contains(errOut, want) {
			t.Errorf("config check of a bad file: exit %d, want 1, stderr lacks %q:\n%s", code, want, errOut)
		}
	}
}

// TestOperatorVerbWithServerHostPort: the operator verbs reach a host
// given as host:port, with --server or $BERTH_SERVER; a misspelt
// subscription is not found (exit 4) and the host names the one it meant.
func TestOperatorVerbWithServerHostPort(t *testing.T) {
	h := newHost(t, hostConfig{})
	h.uploadNotifier(t, 201)
	hostPort := strings.TrimPrefix(h.URL, "http://")
	for _, c := range []struct {
		name string
		env  []string
		args []string
	}{
		{"--server", nil, []string{"--server", hostPort, "subscriptions", "list"}},
		{"$BERTH_SERVER", []string{"BERTH_SERVER=" + hostPort}, []string{"subs", "ls"}},
	} {
		out, errOut, code := berth(t, c.env, c.args...)
		if code != 0 || !strings.Contains(out, subName) {
			t.Errorf("%s: berth %s: exit %d\n%s%s", c.name, strings.Join(c.args, " "), code, out, errOut)
		}
	}
	misspelt := strings.Replace(subName, "Shipped", "Shiped", 1)
	_, errOut, code := berth(t, nil, "--server", hostPort, "subs", "pause", misspelt)
	if want := fmt.Sprintf("unknown subscription %q; did you mean %q?", misspelt, subName); code != 4 || !strings.Contains(errOut, want) {
		t.Errorf("pausing %s: exit %d, want 4 and %q:\n%s", misspelt, code, want, errOut)
	}
	if st := h.subscription(t); st.State != "running" {
		t.Errorf("the subscription is %s after a refused pause", st.State)
	}
}
