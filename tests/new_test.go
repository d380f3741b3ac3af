package tests

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/testbuild"
)

// TestNewModuleBuildsAndRuns is the path of a handler author outside this
// repository, in both languages and for every kind: `berth new` writes the
// module into a temporary directory, its own test passes as written (go test,
// cargo test), its build script builds the .wasm, and the built host, given
// it, handles an OrderPlaced event: the reactor's request reaches the
// service, the projection's read model counts the order, the saga's command
// reaches the gateway.
func TestNewModuleBuildsAndRuns(t *testing.T) {
	rustTarget := t.TempDir() // one cargo target directory: the SDK is compiled once for the three crates
	for _, lang := range []string{"go", "rust"} {
		for _, kind := range []string{"reactor", "projection", "saga"} {
			t.Run(lang+"/"+kind, func(t *testing.T) {
				name := "my-" + kind
				dir := filepath.Join(t.TempDir(), name)
				newModule(t, "new", kind, name, "--lang", lang, "--dir", dir)
				wasm := buildNewModule(t, lang, dir, name, rustTarget)
				runNewModule(t, kind, name, wasm)
			})
		}
	}
}

// newModule runs the built binary's `berth new` with args; it must succeed.
func newModule(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command(hostBin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("berth %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// buildNewModule runs the module's test and its build script as its README
// says, and returns the module it built.
func buildNewModule(t *testing.T, lang, dir, name, rustTarget string) []byte {
	t.Helper()
	env := append(os.Environ(), "GOWORK=off")
	test := []string{"go", "test", "./..."}
	if lang == "rust" {
		tc, err := testbuild.RustToolchain()
		if err != nil {
			t.Fatal(err)
		}
		// The toolchain testbuild found (Debian's, with the wasm32-wasi standard library, first),
		// before any other cargo or rustc on PATH.
		env = append(env, "PATH="+filepath.Dir(tc.Rustc)+string(os.PathListSeparator)+os.Getenv("PATH"),
			"RUSTC="+tc.Rustc, "CARGO_TARGET_DIR="+rustTarget)
		test = []string{tc.Cargo, "test", "--offline"}
	}
	for _, args := range [][]string{test, {"./build.sh"}} {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir, cmd.Env = dir, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s in the new %s module: %v\n%s", strings.Join(args, " "), lang, err, out)
		}
	}
	wasm, err := os.ReadFile(filepath.Join(dir, name+".wasm"))
	if err != nil {
		t.Fatalf("build.sh wrote no module: %v", err)
	}
	return wasm
}

// runNewModule uploads the module of kind to a fresh host, appends one
// OrderPlaced event and waits until the handler's effect is seen.
func runNewModule(t *testing.T, kind, name string, wasm []byte) {
	t.Helper()
	processor := map[string]string{"reactor": "MyReactor", "projection": "MyProjection", "saga": "MySaga"}[kind]
	sub := processor + ".onOrderPlaced"
	var cfg hostConfig
	var h *hostProc       // started once cfg is known; seen runs after
	var seen func() error // nil once the event was handled
	switch kind {
	case "reactor":
		var mu sync.Mutex
		var keys []string
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			keys = append(keys, r.Method+" "+r.URL.Path+" "+r.Header.Get("Idempotency-Key"))
			mu.Unlock()
		}))
		t.Cleanup(srv.Close)
		cfg.Extra = fmt.Sprintf("[modules.%s]\nallowed-hosts = [%q]\nconfig = { target-url = %q }\n",
			name, strings.TrimPrefix(srv.URL, "http://"), srv.URL)
		seen = func() error {
			mu.Lock()
			defer mu.Unlock()
			if len(keys) > 1 || len(keys) == 1 && keys[0] != "POST /orders/o-1 "+sub+":Order/o-1@1:0" {
				t.Fatalf("the service got %q; want one POST /orders/o-1 with the invocation key", keys)
			}
			if len(keys) != 1 {
				return errors.New("the service got nothing yet")
			}
			return nil
		}
	case "projection":
		seen = func() error {
			var got struct{ Orders, Total int }
			r := h.request("GET", "/v1/projections/"+sub+"/buyer%2Fbuyer-42", nil)
			if r.Status != 200 || json.Unmarshal(r.Body, &got) != nil || got.Orders != 1 || got.Total != 1999 {
				return fmt.Errorf("buyer-42's summary: %s, want 1 order of 1999", r)
			}
			return nil
		}
	case "saga":
		svc := newCommandService(t)
		cfg.Extra = fmt.Sprintf("[commands.Shipment]\nurl = %q\n", svc.srv.URL+"/shipments")
		seen = func() error {
			cmds := svc.of("PrepareShipment")
			if len(cmds) > 1 || len(cmds) == 1 && (cmds[0].AggregateType != "Shipment" || cmds[0].AggregateID != "o-1") {
				t.Fatalf("the gateway got %+v; want one PrepareShipment to Shipment o-1", cmds)
			}
			if len(cmds) != 1 {
				return errors.New("the gateway got no PrepareShipment yet")
			}
			return nil
		}
	}
	h = newHost(t, cfg)
	var info moduleInfo
	h.must(201, "PUT", "/v1/modules/"+name, wasm, "Content-Type", "application/wasm").JSON(t, &info)
	if info.Processor != processor || info.Kind != kind || len(info.Subscriptions) != 1 || info.Subscriptions[0] != sub {
		t.Fatalf("upload: %+v; want the %s %s with the subscription %s", info, kind, processor, sub)
	}
	h.must(201, "POST", "/v1/events", map[string]any{"aggregateType": "Order", "aggregateId": "o-1", "ownerId": "buyer-42",
		"events": []map[string]any{{"type": "OrderPlaced", "data": map[string]any{"item": "sku-7", "total": 1999}}}})
	checkfor.Within(t, 30*time.Second, seen)
	if parked := h.parked(t); len(parked) != 0 {
		t.Errorf("parked %+v", parked)
	}
}
