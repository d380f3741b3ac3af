package tests

import (
	"fmt"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// deepConfigs are 16 KiB configurations nested 8,000 deep, each way TOML
// nests, after a valid first part; the second is the case of issue 9.
func deepConfigs(valid string) map[string]string {
	const depth = 8000
	return map[string]string{
		"arrays":        valid + "x = " + strings.Repeat("[", depth) + strings.Repeat("]", depth) + "\n",
		"brackets":      valid + strings.Repeat("[", 2*depth) + "\n",
		"inline tables": valid + "x = " + strings.Repeat("{a=", depth) + "1" + strings.Repeat("}", depth) + "\n",
		"dotted key":    valid + "x" + strings.Repeat(".a", depth) + " = 1\n",
	}
}

// peakRSS is the most memory the process has held (VmHWM), in KiB.
func peakRSS(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatalf("read the host's memory: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			if err != nil {
				t.Fatalf("VmHWM %q: %v", v, err)
			}
			return n
		}
	}
	t.Fatal("no VmHWM in /proc/<pid>/status")
	return 0
}

// TestDeepConfig: a bad file costs no more than parsing it. A configuration
// nested 8,000 deep is refused on POST /v1/config/reload with a problem
// naming the file, its line and the limit, and on SIGHUP with a log line;
// the running configuration stays (its override still applies), and the
// host's peak memory does not grow (it went past 1.5 GiB). At start, such a
// file makes the host exit non-zero with the same one clear error.
func TestDeepConfig(t *testing.T) {
	svc := newNotifier(t)
	valid := hostConfig{NotifyURL: svc.URL()}.TOML() + "[subscriptions.\"ShipmentNotifier.onOrderShipped\".retry]\nmax-attempts = 2\n"
	h := newHost(t, hostConfig{})
	writeFile(t, h.Config, valid)
	h.must(200, "POST", "/v1/config/reload", nil)
	h.uploadNotifier(t, 201)
	maxAttempts := func() (any, string) {
		ma := h.subscription(t).Retry["max-attempts"]
		return ma.Value, ma.Source
	}
	if v, src := maxAttempts(); v != 2.0 || src != "override" {
		t.Fatalf("max-attempts %v from %q, want 2 from override", v, src)
	}
	before := peakRSS(t, h.cmd.Process.Pid)
	line := strings.Count(valid, "\n") + 1
	refusals := 0
	for name, text := range deepConfigs(valid) {
		writeFile(t, h.Config, text)
		r := h.must(400, "POST", "/v1/config/reload", nil)
		var p problemDoc
		r.JSON(t, &p)
		where := "berth.toml:" + strconv.Itoa(line)
		// Brackets alone are a TOML syntax error, which the parser finds at once.
		deep := name == "brackets" || strings.Contains(p.Detail, "nested more than 32 deep")
		if !strings.Contains(p.Detail, where) || !deep {
			t.Errorf("%s: refused reload says %q; want %s and that it is nested more than 32 deep", name, p.Detail, where)
		}
		h.Signal(syscall.SIGHUP)
		refusals++
		checkfor.Within(t, 10*time.Second, func() error {
			if n := strings.Count(h.Stderr(), "config reload refused"); n < refusals {
				return fmt.Errorf("%s: the host logged %d refused reloads, want %d", name, n, refusals)
			}
			return nil
		})
		if v, src := maxAttempts(); v != 2.0 || src != "override" {
			t.Errorf("%s: after the refused reloads max-attempts is %v from %q, want 2 from override", name, v, src)
		}
	}
	if after := peakRSS(t, h.cmd.Process.Pid); after > before+64<<10 {
		t.Errorf("refusing the deep files raised the host's peak memory from %d KiB to %d KiB", before, after)
	}
	// The running configuration still works: an aggregate parks after 2 attempts.
	svc.set("dave", behaviour{Fail: 1000})
	h.appendShipped(t, "d-1", "dave")
	if rec := h.waitParked(t, "d-1", 20*time.Second); rec.Attempts != 2 {
		t.Errorf("d-1 parked after %d attempts, want 2 (the running override)", rec.Attempts)
	}

	// At start.
	data := t.TempDir()
	path := filepath.Join(data, "berth.toml")
	writeFile(t, path, deepConfigs(valid)["inline tables"])
	cmd := exec.Command(hostBin, "serve", "--config", path, "--data", data, "--listen", "127.0.0.1:0")
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("the host did not refuse a deep config within 30s")
	}
	if err == nil || !strings.Contains(string(out), "berth.toml:"+strconv.Itoa(line)) || !strings.Contains(string(out), "nested more than 32 deep") {
		t.Errorf("start with a deep config: %v\n%s\nwant a non-zero exit naming berth.toml:%d and the nesting", err, out, line)
	}
}
