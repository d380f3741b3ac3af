package sandbox

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"testing"

	"github.com/berthhq/berth/internal/testing/testbuild"
)

// modules maps sample packages to their compiled .wasm, built once per run;
// cacheDir is a compilation cache the tests' sandboxes share, so that each
// module is compiled to machine code once per run, not once per test.
var (
	modules  map[string]string
	cacheDir string
)

// Variants of samples built with a tag, for replays of a candidate fix:
// the notifier that passes unknown buyers over, and misbehaving whose
// authorizedCall asks for another URL.
const (
	notifierFix   = "samples/shipment-notifier+skipunknown"
	misbehavingV2 = "samples/misbehaving+replayv2"
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "berth-sandbox-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	modules, err = testbuild.All(dir,
		"samples/shipment-notifier", "samples/misbehaving", "samples/wrong-abi", "samples/no-abi", "samples/bench")
	for _, v := range []struct{ name, pkg, tag string }{{notifierFix, "samples/shipment-notifier", "skipunknown"}, {misbehavingV2, "samples/misbehaving", "replayv2"}} {
		if err == nil {
			modules[v.name], err = testbuild.WasmTags(dir, v.pkg, v.tag)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	cacheDir = dir + "/cache"
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func wasmOf(t testing.TB, pkg string) []byte {
	t.Helper()
	b, err := os.ReadFile(modules[pkg])
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// newSandbox returns a sandbox whose modules start compiled: the pool's
// tests count instances, which a tier-up at a moment of its own would close.
// openSandbox leaves cfg.Tiering as given.
func newSandbox(t testing.TB, cfg Config) *Sandbox {
	t.Helper()
	cfg.Tiering = CompiledOnly
	return openSandbox(t, cfg)
}

func openSandbox(t testing.TB, cfg Config) *Sandbox {
	t.Helper()
	if cfg.CacheDir == "" {
		cfg.CacheDir = cacheDir
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

func load(t testing.TB, s *Sandbox, pkg string, mc ModuleConfig) *Module {
	t.Helper()
	m, err := s.Load(context.Background(), pkg, wasmOf(t, pkg), mc)
	if err != nil {
		t.Fatalf("load %s: %v", pkg, err)
	}
	if m.warmDone != nil {
		<-m.warmDone // a known module's first instance: tests count instances
	}
	return m
}
