package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berthhq/berth/internal/testing/testbuild"
)

// TestNewRefusesWhatItCannotWrite: `berth new` says what is wrong with its
// arguments as a usage error, and writes nothing; tests/new_test.go builds
// and runs what it writes.
func TestNewRefusesWhatItCannotWrite(t *testing.T) {
	root, err := testbuild.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	full := t.TempDir()
	os.WriteFile(filepath.Join(full, "keep"), []byte("mine"), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"new", "filter", "x", "--lang", "go"}, `unknown kind "filter": one of reactor, projection, saga`},
		{[]string{"new", "reactor", "My_Notifier", "--lang", "go"}, `NAME "My_Notifier": character 'M' not allowed`},
		{[]string{"new", "reactor", "7up", "--lang", "go"}, `must start with a lower-case letter`},
		{[]string{"new", "reactor", "x"}, "--lang go or --lang rust is required"},
		{[]string{"new", "reactor", "x", "--lang", "java"}, "--lang go or --lang rust is required"},
		{[]string{"new", "reactor", "x", "--lang", "go", "--sdk", full}, "--sdk " + full + ": not a Berth checkout: no guest-sdk/go.mod"},
		{[]string{"new", "reactor", "x", "--lang", "go", "--sdk", root, "--dir", full}, full + " exists and is not empty"},
		{[]string{"new", "reactor", "x", "--lang", "go", "--server", "h:1"}, "--server is a flag of the operator verbs"},
	} {
		code, out, errOut := runCLI("", c.args...)
		if code != exitUsage || out != "" || !strings.Contains(errOut, c.want) {
			t.Errorf("berth %s: exit %d, stdout %q, stderr %q; want exit %d and %q", strings.Join(c.args, " "), code, out, errOut, exitUsage, c.want)
		}
	}
	if entries, _ := os.ReadDir(full); len(entries) != 1 {
		t.Errorf("%s holds %v; want only what was there", full, entries)
	}
}

// TestNewFindsTheCheckoutItWasBuiltFrom: without --sdk, the module takes
// the SDK of this checkout, and the processor is NAME in CamelCase.
func TestNewFindsTheCheckoutItWasBuiltFrom(t *testing.T) {
	root, err := testbuild.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "m")
	if code, out, errOut := runCLI("", "new", "saga", "order-flow-2", "--lang", "rust", "--dir", dir); code != exitOK || !strings.HasPrefix(out, "wrote "+dir+"\nnext: cd "+dir+" && cargo test --offline && ./build.sh") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	cargo, _ := os.ReadFile(filepath.Join(dir, "Cargo.toml"))
	lib, _ := os.ReadFile(filepath.Join(dir, "src", "lib.rs"))
	if !strings.Contains(string(cargo), `berth = { path = "`+filepath.Join(root, "guest-sdk", "rust")+`" }`) ||
		!strings.Contains(string(lib), `Processor::saga("OrderFlow2")`) {
		t.Errorf("Cargo.toml:\n%s\nsrc/lib.rs:\n%s", cargo, lib)
	}
	if st, err := os.Stat(filepath.Join(dir, "build.sh")); err != nil || st.Mode().Perm()&0o100 == 0 {
		t.Errorf("build.sh: %v %v; want an executable script", st, err)
	}
}

// TestNewWithoutACheckoutNamesTheFlag: a binary that cannot tell where it
// was built from (-trimpath, moved away) asks for --sdk.
func TestNewWithoutACheckoutNamesTheFlag(t *testing.T) {
	root, err := testbuild.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := firstCheckout([]string{t.TempDir(), filepath.Join(root, "cmd")}); err == nil || !strings.Contains(err.Error(), "with --sdk PATH") {
		t.Errorf("err = %v; want one that names --sdk PATH", err)
	}
	if got, err := firstCheckout([]string{t.TempDir(), root}); got != root || err != nil {
		t.Errorf("got %q, %v; want %s", got, err, root)
	}
}

// TestNewRustBuildScriptPicksTheTarget runs the build.sh `berth new
// --lang rust` writes against stand-ins for rustc and cargo, as Debian's
// 1.63 (wasm32-wasi) and rustup's 1.84 and later (wasm32-wasip1) answer,
// and one with no WASI standard library: the script builds for the
// target the toolchain has, copies the module from that target's
// directory, or says what to install. tests/new_test.go builds with the
// real toolchain.
func TestNewRustBuildScriptPicksTheTarget(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	if code, _, errOut := runCLI("", "new", "reactor", "my-mod", "--lang", "rust", "--dir", dir); code != exitOK {
		t.Fatalf("berth new: %s", errOut)
	}
	bin := t.TempDir()
	fake := map[string]string{
		// rustc: its sysroot and target list from the environment.
		"rustc": `#!/bin/sh
case "$*" in
"--print sysroot") echo "$FAKE_SYSROOT" ;;
"--print target-list") printf '%s\n' $FAKE_TARGETS ;;
"--version") echo "rustc $FAKE_VERSION" ;;
*) exit 2 ;;
esac`,
		// cargo: writes the module where cargo would, saying the target.
		"cargo": `#!/bin/sh
while [ $# -gt 0 ]; do [ "$1" = --target ] && t=$2; shift; done
mkdir -p "target/$t/release" && echo "module for $t" > "target/$t/release/my_mod.wasm"`,
	}
	for name, text := range fake {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(text+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name, version, targets string
		installed              []string
		want                   string // the module's text, or the error's
	}{
		{"debian", "1.63.0", "wasm32-unknown-unknown wasm32-wasi", []string{"wasm32-wasi"}, "module for wasm32-wasi"},
		{"rustup", "1.95.0", "wasm32-unknown-unknown wasm32-wasip1 wasm32-wasip2", []string{"wasm32-wasip1"}, "module for wasm32-wasip1"},
		{"between", "1.80.0", "wasm32-wasi wasm32-wasip1", []string{"wasm32-wasi"}, "module for wasm32-wasi"},
		{"without", "1.95.0", "wasm32-wasip1", nil, "rustup target add wasm32-wasip1"},
	} {
		sysroot := t.TempDir()
		for _, tg := range c.installed {
			os.MkdirAll(filepath.Join(sysroot, "lib", "rustlib", tg), 0o755)
		}
		os.RemoveAll(filepath.Join(dir, "target"))
		os.Remove(filepath.Join(dir, "my-mod.wasm"))
		cmd := exec.Command("./build.sh")
		cmd.Dir = dir
		cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin", "FAKE_SYSROOT=" + sysroot, "FAKE_TARGETS=" + c.targets, "FAKE_VERSION=" + c.version}
		out, err := cmd.CombinedOutput()
		wasm, _ := os.ReadFile(filepath.Join(dir, "my-mod.wasm"))
		switch {
		case c.installed == nil && (err == nil || !strings.Contains(string(out), c.want)):
			t.Errorf("%s: %v\n%s; want a failure that says %q", c.name, err, out, c.want)
		case c.installed != nil && (err != nil || strings.TrimSpace(string(wasm)) != c.want):
			t.Errorf("%s: %v\n%s; module %q, want %q", c.name, err, out, wasm, c.want)
		}
	}
}
