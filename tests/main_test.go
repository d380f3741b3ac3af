package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/berthhq/berth/internal/testing/testbuild"
)

// Built once by TestMain.
var (
	hostBin      string // the host binary
	buildDir     string // where TestMain built it; removed after the tests
	notifierWasm []byte // samples/shipment-notifier
	noABIWasm    []byte // samples/no-abi: WebAssembly without the Berth exports
	wrongABIWasm []byte // samples/wrong-abi: reports an ABI version the host does not speak
	notWasm      []byte // samples/not-wasm/handler.wasm: not WebAssembly at all
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "berth-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	buildDir = dir
	if err := build(dir); err != nil {
		fmt.Fprintln(os.Stderr, "tests: build:", err)
		return 1
	}
	return m.Run()
}

func build(dir string) error {
	root, err := testbuild.RepoRoot()
	if err != nil {
		return err
	}
	hostBin = filepath.Join(dir, "host")
	cmd := exec.Command("go", "build", "-o", hostBin, "./cmd/host")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/host: %v\n%s", err, out)
	}
	paths, err := testbuild.All(dir, "samples/shipment-notifier", "samples/no-abi", "samples/wrong-abi")
	if err != nil {
		return err
	}
	read := func(path string) []byte {
		if err != nil {
			return nil
		}
		var b []byte
		b, err = os.ReadFile(path)
		return b
	}
	notifierWasm = read(paths["samples/shipment-notifier"])
	noABIWasm = read(paths["samples/no-abi"])
	wrongABIWasm = read(paths["samples/wrong-abi"])
	notWasm = read(filepath.Join(root, "samples", "not-wasm", "handler.wasm"))
	return err
}
