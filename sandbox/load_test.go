package sandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/testbuild"
	"github.com/berthhq/berth/wasm/abi"
)

func TestLoadDescribesShipmentNotifier(t *testing.T) {
	s := newSandbox(t, Config{})
	m := load(t, s, "samples/shipment-notifier", ModuleConfig{})
	d := m.Description()
	if d.Processor != "ShipmentNotifier" || d.Kind != abi.KindReactor {
		t.Fatalf("processor %s kind %v", d.Processor, d.Kind)
	}
	want := abi.RetrySettings{MaxAttempts: 5, InitialBackoff: time.Second, MaxBackoff: 30 * time.Second, Timeout: 10 * time.Second, Unrecoverable: []string{"UnknownBuyer"}}
	if d.Retry.MaxAttempts != want.MaxAttempts || d.Retry.InitialBackoff != want.InitialBackoff || d.Retry.MaxBackoff != want.MaxBackoff ||
		d.Retry.Timeout != want.Timeout || !slices.Equal(d.Retry.Unrecoverable, want.Unrecoverable) {
		t.Errorf("retry = %+v, want %+v", d.Retry, want)
	}
	if len(d.Handlers) != 1 || d.Handlers[0].Name != "onOrderShipped" || !slices.Equal(d.Handlers[0].EventTypes, []string{"OrderShipped"}) {
		t.Errorf("handlers = %+v", d.Handlers)
	}
	if !slices.Contains(d.Classes, abi.ErrorClass{Name: "UnknownBuyer", Parent: "Notification"}) {
		t.Errorf("classes = %+v, want UnknownBuyer under Notification", d.Classes)
	}
	if len(m.SHA256()) != 64 {
		t.Errorf("sha256 = %q", m.SHA256())
	}
}

func TestLoadRefusesBadModules(t *testing.T) {
	s := newSandbox(t, Config{})
	notWasm, err := os.ReadFile(filepath.Join(mustRoot(t), "samples/not-wasm/handler.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		bytes   []byte
		wantErr error
		wantMsg string
	}{
		{"not wasm at all", notWasm, ErrNotWasm, "do not start with \\0asm"},
		{"empty", nil, ErrNotWasm, "\\0asm"},
		{"wasm magic then garbage", append(slices.Clone(wasmMagic), 0xff, 0xff, 0xff), ErrInvalidModule, ""},
		{"wrong ABI version", wasmOf(t, "samples/wrong-abi"), ErrABI, "ABI version 2; this host speaks version 1"},
		{"no ABI exports", wasmOf(t, "samples/no-abi"), ErrABI, "missing export berth_abi_version"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.Load(context.Background(), "bad", tt.bytes, ModuleConfig{})
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("err = %q, want it to mention %q", err, tt.wantMsg)
			}
		})
	}
}

func TestCheckShapeNamesForeignImports(t *testing.T) {
	// A module compiled with an import the host does not provide is refused
	// by name before it is instantiated.
	s := newSandbox(t, Config{})
	rt, err := s.runtimeFor(context.Background(), runtimeKey{memoryPages: 16})
	if err != nil {
		t.Fatal(err)
	}
	// (module (import "env" "surprise" (func)) (import "berth" "teleport" (func)))
	mod := []byte{0, 'a', 's', 'm', 1, 0, 0, 0,
		1, 4, 1, 0x60, 0, 0, // type section: () -> ()
		2, 0x21, 2, // import section, 2 imports
		3, 'e', 'n', 'v', 8, 's', 'u', 'r', 'p', 'r', 'i', 's', 'e', 0, 0,
		5, 'b', 'e', 'r', 't', 'h', 8, 't', 'e', 'l', 'e', 'p', 'o', 'r', 't', 0, 0,
	}
	cm, err := rt.r.CompileModule(context.Background(), mod)
	if err != nil {
		t.Fatal(err)
	}
	defer cm.Close(context.Background())
	err = checkShape(cm.ImportedFunctions(), cm.ExportedFunctions())
	for _, want := range []string{"imports env.surprise", "imports berth.teleport", "missing export berth_handle", "missing export _initialize"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want it to mention %q", err, want)
		}
	}
}

func mustRoot(t *testing.T) string {
	t.Helper()
	root, err := testbuild.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}
