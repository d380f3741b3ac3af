package sandbox

import (
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestGuardStore: a sandbox over a cache dir keeps the loop guard's rewrite
// of each module, and a later sandbox over the same dir uses what it finds
// (here a stored close-on-done decision, so the module shows it ran no
// rewrite of its own); a file that is truncated, corrupt or not ours is a
// miss, which rewrites the module and replaces the file.
func TestGuardStore(t *testing.T) {
	wasm := wasmOf(t, "samples/misbehaving")
	sum := sha256.Sum256(wasm)
	dir := t.TempDir() // one dir, so that wazero compiles each module once
	g := newGuardStore(dir)
	// stored loads the module in a sandbox over dir with nothing stored, so
	// that it stores the rewrite.
	stored := func(t *testing.T) {
		if err := os.Remove(g.path(sum)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		m := load(t, newSandbox(t, Config{CacheDir: dir}), "samples/misbehaving", ModuleConfig{})
		if m.DeadlineGuard() != guardLoop {
			t.Fatalf("module runs under %s", m.DeadlineGuard())
		}
		code, guard, ok := g.load(sum)
		if !ok || guard != guardLoop || string(code) != string(m.code) {
			t.Fatalf("stored: ok %v, guard %q, %d bytes; want the module's %d rewritten bytes", ok, guard, len(code), len(m.code))
		}
	}
	tests := []struct {
		name  string
		spoil func(t *testing.T)
		want  string // the guard the next sandbox's module runs under
	}{
		{"stored decision is used", func(t *testing.T) {
			if err := g.store(sum, nil, guardCloseOnDone); err != nil {
				t.Fatal(err)
			}
		}, guardCloseOnDone},
		{"truncated", func(t *testing.T) { truncate(t, g.path(sum), 100) }, guardLoop},
		{"header only", func(t *testing.T) { truncate(t, g.path(sum), guardHeader) }, guardLoop},
		{"corrupt", func(t *testing.T) {
			b, err := os.ReadFile(g.path(sum))
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 0xff
			write(t, g.path(sum), b)
		}, guardLoop},
		{"not ours", func(t *testing.T) { write(t, g.path(sum), wasm) }, guardLoop},
		{"missing", func(t *testing.T) {
			if err := os.Remove(g.path(sum)); err != nil {
				t.Fatal(err)
			}
		}, guardLoop},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stored(t)
			tt.spoil(t)
			m := load(t, newSandbox(t, Config{CacheDir: dir}), "samples/misbehaving", ModuleConfig{})
			if m.DeadlineGuard() != tt.want {
				t.Fatalf("module runs under %s, want %s", m.DeadlineGuard(), tt.want)
			}
			if o := m.Invoke(context.Background(), echoEvent("k"), 5*time.Second); o.Kind != Success {
				t.Fatalf("%v: %s", o.Kind, o.Error())
			}
			if _, guard, ok := g.load(sum); !ok || guard != tt.want {
				t.Errorf("after the load the store holds %q (ok %v), want %q", guard, ok, tt.want)
			}
			if left, _ := filepath.Glob(filepath.Join(g.dir, "tmp-*")); len(left) > 0 {
				t.Errorf("temporary files left: %v", left)
			}
		})
	}
}

func truncate(t *testing.T, path string, n int64) {
	t.Helper()
	if err := os.Truncate(path, n); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
