package tests

import (
	"errors"
	"fmt"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

type healthDoc struct {
	Status string `json:"status"`
	Disk   *struct {
		Dir      string `json:"dir"`
		Free     int64  `json:"free"`
		Reserve  int64  `json:"reserve"`
		Writable bool   `json:"writable"`
		Error    string `json:"error"`
	} `json:"disk"`
}

// healthIs says what d reports until its status is want; nil then.
func healthIs(d healthDoc, want string) error {
	if d.Status != want {
		return fmt.Errorf("healthz %q (disk %+v), want %q", d.Status, d.Disk, want)
	}
	return nil
}

func (h *hostProc) health(t *testing.T) healthDoc {
	t.Helper()
	var d healthDoc
	h.must(200, "GET", "/healthz", nil).JSON(t, &d)
	return d
}

// TestDiskReserveRefusesWrites: with a reserve above the free space of the
// data directory's disk (set by a reload, as an operator would when a disk
// fills), every write answers 507 problem+json naming the directory, the
// free space and the reserve, and changes nothing (a module's DELETE
// included: the module stays deployed); reads, the console,
// /healthz ("disk low") keep working and /readyz answers 503. A reload that
// lowers the reserve lets writes through again, and events are delivered.
func TestDiskReserveRefusesWrites(t *testing.T) {
	svc := newNotifier(t)
	cfg := hostConfig{NotifyURL: svc.URL()}.TOML()
	svc.set("nobody", behaviour{Unknown: true}) // parks at once
	h := newHost(t, hostConfig{NotifyURL: svc.URL()})
	h.uploadNotifier(t, 201)
	h.appendShipped(t, "o-1", "ann")
	h.appendShipped(t, "o-9", "nobody")
	checkfor.Within(t, 10*time.Second, func() error { return svc.calledFor("ann", 1) })
	h.waitParked(t, "o-9", 10*time.Second)
	if d := h.health(t); d.Status != "ok" || d.Disk == nil || !d.Disk.Writable || d.Disk.Reserve != 512<<20 {
		t.Fatalf("healthz with the default reserve: %+v", d)
	}

	writeFile(t, h.Config, cfg+"\n[store]\nmin-free = \"1000TiB\"\n")
	h.must(200, "POST", "/v1/config/reload", nil)

	refused := func(method, path string, body any, header ...string) {
		t.Helper()
		r := h.request(method, path, body, header...)
		var p problemDoc
		if r.Status != 507 || r.Header.Get("Content-Type") != "application/problem+json" {
			t.Fatalf("%s %s below the reserve: %s, want 507 problem+json", method, path, r)
		}
		r.JSON(t, &p)
		for _, want := range []string{h.Data, "free", "1000.0TiB", "store.min-free", "nothing was written"} {
			if !strings.Contains(p.Detail, want) {
				t.Errorf("%s %s: detail %q does not say %q", method, path, p.Detail, want)
			}
		}
		if p.Type != "https://berth.dev/problems/insufficient-storage" {
			t.Errorf("%s %s: problem type %s", method, path, p.Type)
		}
	}
	refused("POST", "/v1/events", map[string]any{"aggregateType": "Order", "aggregateId": "o-2", "ownerId": "bob",
		"events": []map[string]any{{"type": "OrderShipped", "data": map[string]string{"carrier": "DHL"}}}})
	refused("PUT", "/v1/modules/"+moduleName, notifierWasm, "Content-Type", "application/wasm") // an update
	refused("DELETE", "/v1/modules/"+moduleName, nil)                                           // removes files: a write too
	refused("POST", "/v1/subscriptions/"+subName+"/pause", nil)
	refused("POST", "/v1/subscriptions/"+subName+"/unpause", nil)
	refused("POST", "/v1/subscriptions/"+subName+"/reset", map[string]any{"position": 1})
	parked := "/v1/subscriptions/" + subName + "/parked/Order/o-9"
	refused("POST", parked+"/resume", map[string]any{"reason": "disk full"})
	refused("POST", parked+"/skip", map[string]any{"reason": "disk full"})
	if recs := h.parked(t); len(recs) != 1 || recs[0].AggregateID != "o-9" || recs[0].State == "resuming" {
		t.Errorf("parked after a refused resume and skip: %+v", recs)
	}

	// Reads, the console and health go on.
	h.must(200, "GET", "/v1/aggregates/Order/o-1/events", nil)
	h.must(404, "GET", "/v1/aggregates/Order/o-2/events", nil) // the refused append stored nothing
	h.must(200, "GET", "/v1/modules/"+moduleName, nil)
	if st := h.subscription(t); st.State != "running" {
		t.Errorf("subscription after a refused pause: %+v", st)
	}
	h.must(200, "GET", "/console/", nil)
	h.must(200, "GET", "/metrics", nil)
	if d := h.health(t); d.Status != "disk low" || d.Disk.Writable || d.Disk.Dir != h.Data || d.Disk.Free <= 0 {
		t.Errorf("healthz below the reserve: %+v", d)
	}
	var p problemDoc
	h.must(503, "GET", "/readyz", nil).JSON(t, &p)
	if p.Type != "https://berth.dev/problems/store-cannot-write" || !strings.Contains(p.Detail, "store.min-free") {
		t.Errorf("readyz below the reserve: %+v", p)
	}

	// Space returns: here, the operator lowers the reserve.
	writeFile(t, h.Config, cfg+"\n[store]\nmin-free = \"1MiB\"\n")
	h.must(200, "POST", "/v1/config/reload", nil)
	if d := h.health(t); d.Status != "ok" || !d.Disk.Writable || d.Disk.Reserve != 1<<20 {
		t.Errorf("healthz after lowering the reserve: %+v", d)
	}
	h.must(200, "GET", "/readyz", nil)
	h.appendShipped(t, "o-2", "bob")
	checkfor.Within(t, 10*time.Second, func() error { return svc.calledFor("bob", 1) })
	if n := len(svc.callsOf("ann")); n != 1 {
		t.Errorf("ann notified %d times, want 1 (the refused reset replayed nothing)", n)
	}
	h.must(202, "POST", parked+"/skip", map[string]any{"reason": "disk has room again"})
}

// runUntilExit runs the host with args and returns its combined output and
// exit error, failing when it does not exit within 30s.
func runUntilExit(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(hostBin, args...)
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("the host did not exit within 30s:\n%s", out)
	}
	return string(out), err
}

// errorLines returns the lines of out that start with "berth:", the host's
// own last word on stderr.
func errorLines(out string) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "berth:") {
			lines = append(lines, l)
		}
	}
	return lines
}

// TestStartRefusedBelowReserve: a host started on a disk with less free
// space than the reserve exits 1 with one line naming the directory, the
// free space and the reserve, and opens no store (which would write).
func TestStartRefusedBelowReserve(t *testing.T) {
	data := t.TempDir()
	path := filepath.Join(data, "berth.toml")
	writeFile(t, path, "[store]\nmin-free = \"1000TiB\"\n")
	out, err := runUntilExit(t, "serve", "--config", path, "--data", data, "--listen", "127.0.0.1:0")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("exit %v, want status 1:\n%s", err, out)
	}
	lines := errorLines(out)
	if len(lines) != 1 {
		t.Fatalf("want one berth: line, got %q:\n%s", lines, out)
	}
	for _, want := range []string{"not starting", data, "free", "below the reserve of 1000.0TiB", "store.min-free"} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("%q does not say %q", lines[0], want)
		}
	}
	if strings.Contains(out, "berth is serving") {
		t.Error("the host served below the reserve")
	}
	for _, store := range []string{"events", "ledger"} {
		if _, err := os.Stat(filepath.Join(data, store)); !os.IsNotExist(err) {
			t.Errorf("the %s store was opened (%v)", store, err)
		}
	}
}

// TestStartFailsOnStoreFile: a store that cannot open one of its files at
// start says which file and why, on one line.
func TestStartFailsOnStoreFile(t *testing.T) {
	h := newHost(t, hostConfig{})
	h.must(201, "POST", "/v1/events", map[string]any{"aggregateType": "Order", "aggregateId": "o-1",
		"events": []map[string]any{{"type": "OrderPlaced", "data": map[string]string{}}}})
	h.Stop()
	vlogs, _ := filepath.Glob(filepath.Join(h.Data, "events", "*.vlog"))
	if len(vlogs) == 0 {
		t.Fatal("the event log has no value log file")
	}
	// A file Badger cannot open: a directory where its value log was.
	if err := os.Remove(vlogs[0]); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(vlogs[0], 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := runUntilExit(t, "serve", "--config", h.Config, "--data", h.Data, "--listen", "127.0.0.1:0")
	if err == nil {
		t.Fatalf("the host started with a broken value log:\n%s", out)
	}
	lines := errorLines(out)
	if len(lines) != 1 {
		t.Fatalf("want one berth: line, got %q:\n%s", lines, out)
	}
	for _, want := range []string{"open event log", "file " + vlogs[0] + ":", "is a directory"} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("%q does not say %q", lines[0], want)
		}
	}
}

// TestShutdownBoundedWhenDataDirRemoved: a host whose data directory is
// removed under it refuses writes (503) and says so on /healthz and
// /readyz; on SIGTERM it cannot flush its stores (Badger would retry that
// forever) and exits 1 after server.shutdown-timeout, naming what it could
// not flush.
func TestShutdownBoundedWhenDataDirRemoved(t *testing.T) {
	h := newHost(t, hostConfig{Extra: "[server]\nshutdown-timeout = \"2s\"\n"})
	h.must(201, "POST", "/v1/events", map[string]any{"aggregateType": "Order", "aggregateId": "o-1",
		"events": []map[string]any{{"type": "OrderPlaced", "data": map[string]string{}}}})
	if err := os.RemoveAll(h.Data); err != nil {
		t.Fatal(err)
	}
	checkfor.Within(t, 10*time.Second, func() error {
		r := h.must(200, "GET", "/healthz", nil)
		var d healthDoc
		r.JSON(t, &d)
		if d.Status != "store cannot write" || d.Disk == nil || d.Disk.Writable || d.Disk.Error == "" {
			return fmt.Errorf("healthz %s, want the store unable to write", r.Body)
		}
		return nil
	})
	var p problemDoc
	h.must(503, "GET", "/readyz", nil).JSON(t, &p)
	if p.Type != "https://berth.dev/problems/store-cannot-write" {
		t.Errorf("readyz with the data directory removed: %+v", p)
	}
	r := h.must(503, "POST", "/v1/events", map[string]any{"aggregateType": "Order", "aggregateId": "o-2",
		"events": []map[string]any{{"type": "OrderPlaced", "data": map[string]string{}}}})
	r.JSON(t, &p)
	if p.Type != "https://berth.dev/problems/store-unavailable" || !strings.Contains(p.Detail, h.Data) {
		t.Errorf("append with the data directory removed: %+v", p)
	}

	start := time.Now()
	h.Signal(syscall.SIGTERM)
	select {
	case <-h.done:
	case <-time.After(20 * time.Second):
		t.Fatal("the host did not exit within 20s of SIGTERM with a shutdown-timeout of 2s")
	}
	took := time.Since(start)
	var exit *exec.ExitError
	if !errors.As(h.waitErr, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("exit %v, want status 1", h.waitErr)
	}
	if took < 2*time.Second || took > 10*time.Second {
		t.Errorf("the shutdown took %s with a shutdown-timeout of 2s", took)
	}
	checkfor.Within(t, 5*time.Second, func() error {
		if s := h.Stderr(); len(errorLines(s)) == 0 {
			return fmt.Errorf("no berth: line yet; the host's log: %q", s)
		}
		return nil
	})
	lines := errorLines(h.Stderr())
	if len(lines) != 1 {
		t.Fatalf("want one berth: line, got %q", lines)
	}
	for _, want := range []string{"shutdown did not finish within server.shutdown-timeout (2s)",
		filepath.Join(h.Data, "events"), "not flushed", "no such file or directory"} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("%q does not say %q", lines[0], want)
		}
	}
}
