package tests

import (
	"github.com/berthhq/berth/internal/testing/checkfor"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// TestNewHostOverFilledCache deploys the notifier, through the binary, on a
// new host whose data directory holds only the compilation cache a first
// host left: the host answers the PUT from what it recorded of the module
// (no guest run before the 201) and makes the module's first instance in
// the background. The answer must describe the module as the first host's
// did, the module must run compiled at once, and the first order shipped
// must be notified. A host with another configuration for the module (a
// guest may read its configuration while it describes itself) deploys it
// as well.
func TestNewHostOverFilledCache(t *testing.T) {
	svc := newNotifier(t)
	cfg := hostConfig{NotifyURL: svc.URL()}
	first := newHost(t, cfg)
	want := first.uploadNotifier(t, 201)
	waitCompiled(t, first)
	first.Stop()

	for i, c := range []hostConfig{cfg, {NotifyURL: svc.URL(), NotifyToken: "other"}} {
		h := hostOverCache(t, first, c)
		if got := h.uploadNotifier(t, 201); !reflect.DeepEqual(got, want) {
			t.Fatalf("host %d over the cache answered %+v, want the first host's %+v", i+2, got, want)
		}
		if got := h.mustMetric(`berth_sandbox_module_compiled{module="` + moduleName + `"}`); got != 1 {
			t.Errorf("host %d: berth_sandbox_module_compiled = %v right after the PUT, want 1 (cached code)", i+2, got)
		}
		order := []string{"o-cache-a", "o-cache-b"}[i]
		h.appendShipped(t, order, "alice")
		svc.waitNotified(t, key(order, 1), 30*time.Second)
		h.Stop()
	}
}

// waitCompiled waits until h runs the notifier on compiled code: its
// background compile (tier-up) has filled the compilation cache.
func waitCompiled(t testing.TB, h *hostProc) {
	t.Helper()
	checkfor.Within(t, 60*time.Second, func() error {
		return reads("GET /metrics", string(h.must(200, "GET", "/metrics", nil).Body),
			`berth_sandbox_module_compiled{module="`+moduleName+`"} 1`)
	})
}

// hostOverCache starts a host on cfg whose new data directory holds only
// the compilation cache (<data>/wasm-cache) of first, which has stopped.
func hostOverCache(t testing.TB, first *hostProc, cfg hostConfig) *hostProc {
	t.Helper()
	data := t.TempDir()
	if err := os.CopyFS(filepath.Join(data, "wasm-cache"), os.DirFS(filepath.Join(first.Data, "wasm-cache"))); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(data, "berth.toml")
	writeFile(t, path, cfg.TOML())
	return startHost(t, data, path)
}
