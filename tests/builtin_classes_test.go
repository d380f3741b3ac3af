package tests

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/retry"
)

// TestClassifierRuleNamesABuiltin: a classifier rule may name any builtin
// class, but the built host refuses to start with one naming a berth.* class
// that is not builtin (a typo that would never match), naming the key, its
// line and the value.
func TestClassifierRuleNamesABuiltin(t *testing.T) {
	t.Run("every builtin class may be named", func(t *testing.T) {
		var rules strings.Builder
		for _, b := range retry.Builtins() {
			fmt.Fprintf(&rules, "[[classifier.rules]]\nclass = %q\nas = \"recoverable\"\n\n", b.Name)
		}
		h := newHost(t, hostConfig{Extra: rules.String()})
		h.must(200, "GET", "/readyz", nil)
	})
	t.Run("a berth. name that is not builtin is refused", refusesUnknownBuiltin)
}

// refusesUnknownBuiltin starts the host with a rule for berth.Timout.
func refusesUnknownBuiltin(t *testing.T) {
	data := t.TempDir()
	path := filepath.Join(data, "berth.toml")
	writeFile(t, path, "[[classifier.rules]]\nclass = \"berth.WaitTimeout\"\nas = \"recoverable\"\n\n"+
		"[[classifier.rules]]\nclass = \"berth.Timout\"\nas = \"unrecoverable\"\n")
	cmd := exec.Command(hostBin, "serve", "--config", path, "--data", data, "--listen", "127.0.0.1:0")
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("the host did not refuse the rule within 30s:\n%s", out)
	}
	if err == nil {
		t.Errorf("the host exited 0 with a rule for berth.Timout:\n%s", out)
	}
	s := string(out)
	if !strings.Contains(s, "berth.toml:6") || !strings.Contains(s, "classifier.rules[1].class") ||
		!strings.Contains(s, `"berth.Timout"`) || !strings.Contains(s, "no builtin class has that name") {
		t.Errorf("the error should name berth.toml:6, classifier.rules[1].class and \"berth.Timout\":\n%s", s)
	}
	if strings.Contains(s, "berth.WaitTimeout") {
		t.Errorf("the rule for the builtin berth.WaitTimeout was refused too:\n%s", s)
	}
	if strings.Contains(s, "berth is serving") {
		t.Errorf("the host served with the bad rule")
	}
}
