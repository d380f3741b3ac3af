package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berthhq/berth/internal/testbuild"
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
