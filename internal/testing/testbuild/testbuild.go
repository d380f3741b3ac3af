// Package testbuild compiles the sample guests for tests with the standard Go
// toolchain (GOOS=wasip1 GOARCH=wasm, -buildmode=c-shared). The Go build
// cache makes repeated builds cheap.
package testbuild

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// RepoRoot returns the directory holding go.work, walking up from the
// working directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("testbuild: no go.work above the working directory")
		}
		dir = parent
	}
}

// Wasm builds the package at pkg (relative to the repository root, e.g.
// "samples/shipment-notifier") into outDir and returns the module's path.
func Wasm(outDir, pkg string) (string, error) { return WasmTags(outDir, pkg) }

// WasmTags is Wasm with build tags: a variant of a sample (its name in
// outDir has the tags in it, so variants sit side by side).
func WasmTags(outDir, pkg string, tags ...string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	name := strings.ReplaceAll(pkg, "/", "_")
	for _, t := range tags {
		name += "+" + t
	}
	out := filepath.Join(outDir, name+".wasm")
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-tags", strings.Join(tags, ","), "-o", out, "./"+pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("testbuild: build %s: %v\n%s", pkg, err, b)
	}
	return out, nil
}

// All builds each package into outDir and returns their paths by package.
func All(outDir string, pkgs ...string) (map[string]string, error) {
	paths := make(map[string]string, len(pkgs))
	for _, p := range pkgs {
		path, err := Wasm(outDir, p)
		if err != nil {
			return nil, err
		}
		paths[p] = path
	}
	return paths, nil
}

// Bytes builds the package at pkg in a temporary directory and returns the
// module's bytes; wrap it in sync.OnceValues to build once per test binary.
func Bytes(pkg string) ([]byte, error) {
	return built(func(dir string) (string, error) { return Wasm(dir, pkg) })
}

// built runs build with a temporary directory and returns the bytes of the
// module it wrote there.
func built(build func(dir string) (string, error)) ([]byte, error) {
	dir, err := os.MkdirTemp("", "berth-testbuild-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path, err := build(dir)
	if err != nil {
		return nil, err
	}
	return os.ReadFile(path)
}

// Rebuilt returns wasm with a custom section "build" holding id appended:
// another build of the same module, with bytes (and a sha256) of its own,
// as a deployer's next upload would be. The host ignores custom sections.
func Rebuilt(wasm []byte, id string) []byte {
	const name = "build"
	payload := append([]byte{byte(len(name))}, name...)
	payload = append(payload, id...)
	if len(payload) > 127 {
		panic("testbuild: Rebuilt: id too long for a one-byte section size")
	}
	out := append([]byte(nil), wasm...)
	return append(append(out, 0, byte(len(payload))), payload...)
}
