package registry_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/berthhq/berth/assembly"
	"github.com/berthhq/berth/config"
	"github.com/berthhq/berth/internal/testing/syncbuf"
	"github.com/berthhq/berth/internal/testing/testbuild"
)

// An upload, a rollback and each load of a stored module at start are one
// info line each, naming the module, its version and what it subscribes.
func TestModuleUploadAndLoadAreLogged(t *testing.T) {
	ctx := context.Background()
	cfg := config.Default()
	cfg.Server.DataDir = t.TempDir()
	open := func(buf *syncbuf.Buffer) *assembly.Host {
		asm, err := assembly.Open(ctx, cfg, assembly.Options{Logger: slog.New(slog.NewJSONHandler(buf, nil))})
		if err != nil {
			t.Fatal(err)
		}
		return asm
	}
	var first, second syncbuf.Buffer
	asm := open(&first)
	wasm := bytesOf(t, notifierWasm)
	if _, _, err := asm.Modules.Put(ctx, "m", wasm); err != nil {
		t.Fatal(err)
	}
	// Another build: the bytes already current would change nothing.
	if _, _, err := asm.Modules.Put(ctx, "m", testbuild.Rebuilt(wasm, "2")); err != nil {
		t.Fatal(err)
	}
	if _, err := asm.Modules.Rollback(ctx, "m", 1); err != nil {
		t.Fatal(err)
	}
	asm.Close(ctx)
	up := first.JSONLines("module uploaded")
	if len(up) != 2 || up[0]["module"] != "m" || up[0]["version"] != 1.0 || up[1]["version"] != 2.0 ||
		up[0]["processor"] != "ShipmentNotifier" || up[0]["level"] != "INFO" || up[0]["source"] != nil {
		t.Errorf("upload lines %v", up)
	}
	if rb := first.JSONLines("module rolled back"); len(rb) != 1 || rb[0]["version"] != 3.0 {
		t.Errorf("rollback lines %v", rb)
	}
	asm = open(&second)
	defer asm.Close(ctx)
	loaded := second.JSONLines("module loaded")
	if len(loaded) != 1 || loaded[0]["module"] != "m" || loaded[0]["version"] != 3.0 ||
		!strings.Contains(strings.Join(anyStrings(loaded[0]["subscriptions"]), ","), "ShipmentNotifier.onOrderShipped") {
		t.Errorf("load lines %v", loaded)
	}
}

func anyStrings(v any) []string {
	var out []string
	if l, ok := v.([]any); ok {
		for _, s := range l {
			out = append(out, s.(string))
		}
	}
	return out
}
