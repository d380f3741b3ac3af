package testbuild_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/berthhq/berth/hostspec"
	"github.com/berthhq/berth/internal/testing/testbuild"
)

// rustCrates are the Rust crates of the repository whose own tests
// (`cargo test`) the Go test command runs: the SDK and its samples.
var rustCrates = []string{
	"guest-sdk/rust",
	"samples/shipment-notifier-rs",
	"samples/order-summary-rs",
	"samples/order-saga-rs",
	"samples/misbehaving-rs",
}

// TestRustCrates runs each crate's native tests with cargo, so that the one
// test command (go test -timeout 25m ./... ./guest-sdk/... ./wasm/abi/...) covers the
// Rust SDK too: its codec against the Go codec's golden vectors, its test
// kit, and the samples' scenarios.
func TestRustCrates(t *testing.T) {
	for _, c := range rustCrates {
		t.Run(c, func(t *testing.T) {
			out, err := testbuild.Cargo(c, "test")
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s", out)
		})
	}
}

// TestRustReadmeExample builds the crate a Rust author gets from
// guest-sdk/rust/README.md alone: its Cargo.toml and its two Rust examples
// (the processor, and its test) in a new crate outside the repository. The
// test passes under cargo test, and the module builds and loads in the
// host's sandbox.
func TestRustReadmeExample(t *testing.T) {
	root, err := testbuild.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "guest-sdk", "rust", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := func(lang string) []string {
		var out []string
		for _, b := range strings.Split(string(readme), "```"+lang+"\n")[1:] {
			out = append(out, strings.SplitN(b, "```", 2)[0])
		}
		return out
	}
	toml, rust := blocks("toml"), blocks("rust")
	if len(toml) < 1 || len(rust) < 2 {
		t.Fatalf("README has %d toml and %d rust examples; want the Cargo.toml, the processor and its test", len(toml), len(rust))
	}
	crate := t.TempDir()
	cargoToml := strings.Replace(toml[0], "/path/to/berth/guest-sdk/rust", filepath.Join(root, "guest-sdk", "rust"), 1)
	lib := rust[0] + "\n#[cfg(test)]\nmod tests {\n    use super::*;\n" + rust[1] + "}\n"
	if err := os.MkdirAll(filepath.Join(crate, "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"Cargo.toml": cargoToml, "src/lib.rs": lib} {
		if err := os.WriteFile(filepath.Join(crate, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := testbuild.Cargo(crate, "test"); err != nil {
		t.Fatal(err)
	} else if !strings.Contains(string(out), "test result: ok. 1 passed") {
		t.Fatalf("the README's test did not run:\n%s", out)
	}
	path, err := testbuild.Rust(t.TempDir(), crate)
	if err != nil {
		t.Fatal(err)
	}
	wasm, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	spec := hostspec.New(t, wasm)
	if spec.Processor.Name != "ShipmentNotifier" {
		t.Errorf("the README's module serves %s", spec.Processor.Name)
	}
}

// TestWasiTarget: the WASI target's name is picked from what rustc lists
// and what its sysroot holds, for Debian's 1.63 (wasm32-wasi), rustup's
// 1.84 and later (wasm32-wasip1) and the releases between that list both;
// and the toolchain this machine's tests build with has one of them.
func TestWasiTarget(t *testing.T) {
	const (
		debian = "wasm32-unknown-unknown\nwasm32-wasi\nx86_64-unknown-linux-gnu\n"
		both   = "wasm32-wasi\nwasm32-wasip1\nwasm32-wasip1-threads\nwasm32-wasip2\n"
		rustup = "wasm32-unknown-unknown\nwasm32-wasip1\nwasm32-wasip1-threads\nwasm32-wasip2\n"
	)
	has := func(ts ...string) func(string) bool {
		return func(t string) bool { return slices.Contains(ts, t) }
	}
	for _, c := range []struct {
		name, list string
		installed  func(string) bool
		want, err  string
	}{
		{"debian 1.63", debian, has("wasm32-wasi"), "wasm32-wasi", ""},
		{"rustup 1.95", rustup, has("wasm32-wasip1"), "wasm32-wasip1", ""},
		{"1.80, old name installed", both, has("wasm32-wasi"), "wasm32-wasi", ""},
		{"1.80, both installed", both, has("wasm32-wasi", "wasm32-wasip1"), "wasm32-wasip1", ""},
		{"rustup without the target", rustup, has(), "", "rustup target add wasm32-wasip1"},
		{"debian without libstd", debian, has(), "", "libstd-rust-dev-wasm32"},
		{"no WASI at all", "x86_64-unknown-linux-gnu\n", has(), "", "neither"},
	} {
		got, err := testbuild.WasiTarget(c.list, c.installed)
		if got != c.want || (c.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: %q, %v; want %q, %q", c.name, got, err, c.want, c.err)
		}
	}
	tc, err := testbuild.RustToolchain()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(testbuild.RustTargets, tc.Target) {
		t.Fatalf("toolchain %+v", tc)
	}
	t.Logf("building with %s for %s", tc.Rustc, tc.Target)
}
