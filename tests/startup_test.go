package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestStartup starts the host without --config, which writes the commented
// default berth.toml into the data directory, logs that it did, and serves;
// and with a bad
// file, which it refuses at start naming the key and its line.
func TestStartup(t *testing.T) {
	t.Run("default config", func(t *testing.T) {
		data := t.TempDir()
		h := startHostArgs(t, data, "", "serve", "--data", data, "--listen", "127.0.0.1:0")
		b, err := os.ReadFile(filepath.Join(data, "berth.toml"))
		if err != nil {
			t.Fatalf("no default berth.toml: %v", err)
		}
		for _, want := range []string{"max-attempts", "initial-backoff", "max-body-size"} {
			if !strings.Contains(string(b), want) {
				t.Errorf("the default berth.toml does not mention %s", want)
			}
		}
		h.must(200, "GET", "/healthz", nil)
		h.must(200, "GET", "/readyz", nil)
		var subs struct {
			Subscriptions []any `json:"subscriptions"`
		}
		h.must(200, "GET", "/v1/subscriptions", nil).JSON(t, &subs)
		if len(subs.Subscriptions) != 0 {
			t.Errorf("a new host has subscriptions: %+v", subs)
		}
		if !strings.Contains(h.Stderr(), "wrote the default configuration") || !strings.Contains(h.Stderr(), filepath.Join(data, "berth.toml")) {
			t.Errorf("the first start does not say it wrote %s:\n%s", filepath.Join(data, "berth.toml"), h.Stderr())
		}
		if !strings.Contains(h.Stderr(), "loopback only") {
			t.Errorf("with no token the host should say it listens on loopback only")
		}
	})

	t.Run("bad config", func(t *testing.T) {
		data := t.TempDir()
		path := filepath.Join(data, "berth.toml")
		writeFile(t, path, "[subscription.retry]\nmax-attempts = 3\ninitial-backoff = \"2 parsecs\"\n")
		cmd := exec.Command(hostBin, "serve", "--config", path, "--data", data, "--listen", "127.0.0.1:0")
		done := make(chan struct{})
		var out []byte
		var err error
		go func() { out, err = cmd.CombinedOutput(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("the host did not refuse a bad config within 30s")
		}
		if err == nil {
			t.Errorf("the host exited 0 with a bad config:\n%s", out)
		}
		if s := string(out); !strings.Contains(s, "berth.toml:3") || !strings.Contains(s, "initial-backoff") {
			t.Errorf("the error should name berth.toml:3 and initial-backoff:\n%s", s)
		}
		if strings.Contains(string(out), "berth is serving") {
			t.Errorf("the host served with a bad config")
		}
	})
}
