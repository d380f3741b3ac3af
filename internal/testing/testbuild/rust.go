package testbuild

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// RustTargets are the names of the Rust target Berth modules are built
// for, WASI preview 1, newest first: Rust 1.78 and later call it
// wasm32-wasip1, and 1.84 removed the old name; Debian's 1.63 (its
// libstd-rust-dev-wasm32, what CI has) knows only wasm32-wasi.
var RustTargets = []string{"wasm32-wasip1", "wasm32-wasi"}

// WasiTarget picks the target to build for from what a rustc says:
// targetList is its `--print target-list`, and installed reports whether
// its sysroot has a target's standard library. It returns the first of
// RustTargets that is both listed and installed, or an error that says
// what to install. berth new's build.sh picks alike, in sh.
func WasiTarget(targetList string, installed func(target string) bool) (string, error) {
	listed := map[string]bool{}
	for _, t := range strings.Fields(targetList) {
		listed[t] = true
	}
	for _, t := range RustTargets {
		if listed[t] && installed(t) {
			return t, nil
		}
	}
	switch {
	case listed[RustTargets[0]]:
		return "", fmt.Errorf("no %s standard library: rustup target add %s", RustTargets[0], RustTargets[0])
	case listed[RustTargets[1]]:
		return "", fmt.Errorf("no %s standard library: install Debian's libstd-rust-dev-wasm32 (or rustup target add %s)", RustTargets[1], RustTargets[1])
	}
	return "", fmt.Errorf("rustc knows neither %s nor %s", RustTargets[0], RustTargets[1])
}

// Toolchain is a cargo, the rustc it builds with and the name that rustc
// gives the WASI target (WasiTarget).
type Toolchain struct {
	Cargo, Rustc, Target string
}

var probed struct {
	once sync.Once
	tc   Toolchain
	err  error
}

// RustToolchain finds a cargo and rustc whose sysroot has the standard
// library for the WASI target (WasiTarget: wasm32-wasip1 or, before Rust
// 1.78, wasm32-wasi): Debian's /usr/bin/cargo and /usr/bin/rustc first
// (what CI installs), then those on PATH. The error says what to install.
func RustToolchain() (Toolchain, error) {
	probed.once.Do(func() {
		var tried []string
		candidates := []Toolchain{{Cargo: "/usr/bin/cargo", Rustc: "/usr/bin/rustc"}}
		if c, err := exec.LookPath("cargo"); err == nil {
			if r, err := exec.LookPath("rustc"); err == nil {
				candidates = append(candidates, Toolchain{Cargo: c, Rustc: r})
			}
		}
		for _, tc := range candidates {
			target, err := toolchainTarget(tc.Rustc)
			if err != nil {
				tried = append(tried, fmt.Sprintf("%s: %v", tc.Rustc, err))
				continue
			}
			if _, err := os.Stat(tc.Cargo); err != nil {
				tried = append(tried, fmt.Sprintf("%s: %v", tc.Cargo, err))
				continue
			}
			tc.Target = target
			probed.tc = tc
			return
		}
		probed.err = fmt.Errorf("testbuild: no Rust toolchain with a WASI target (install Debian's rustc cargo libstd-rust-dev-wasm32, or rustup target add wasm32-wasip1): %s",
			strings.Join(tried, "; "))
	})
	return probed.tc, probed.err
}

// toolchainTarget asks rustc for its targets and sysroot and returns the
// WASI target it has the standard library of.
func toolchainTarget(rustc string) (string, error) {
	list, err := exec.Command(rustc, "--print", "target-list").Output()
	if err != nil {
		return "", err
	}
	sysroot, err := exec.Command(rustc, "--print", "sysroot").Output()
	if err != nil {
		return "", err
	}
	return WasiTarget(string(list), func(t string) bool {
		_, err := os.Stat(filepath.Join(strings.TrimSpace(string(sysroot)), "lib", "rustlib", t))
		return err == nil
	})
}

// cargoTargetDir is where every Rust build of the tests goes: one cache
// shared by the test binaries (cargo locks it), outside the repository.
func cargoTargetDir() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	dir = filepath.Join(dir, "berth-testbuild", "cargo-target")
	return dir, os.MkdirAll(dir, 0o755)
}

// Cargo runs cargo with args (always --offline: there is no registry to
// reach) in the crate at crateDir (relative to the repository root, or
// absolute) with the
// toolchain RustToolchain found, and returns its combined output.
func Cargo(crateDir string, args ...string) ([]byte, error) {
	tc, err := RustToolchain()
	if err != nil {
		return nil, err
	}
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	target, err := cargoTargetDir()
	if err != nil {
		return nil, err
	}
	dir := inRepo(root, crateDir)
	statSources(root, dir, "guest-sdk/rust", "wasm/abi/testdata", "guest-sdk/berthtest/testdata")
	cmd := exec.Command(tc.Cargo, append(args, "--offline")...)
	cmd.Dir = dir
	// The toolchain's own directory comes first on PATH, and RUSTC and
	// RUSTDOC name its compilers, so that no other rustc on PATH (a rustup
	// one without the target) mixes in: rlibs of two versions do not link.
	bin := filepath.Dir(tc.Rustc)
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"RUSTC="+tc.Rustc, "RUSTDOC="+filepath.Join(bin, "rustdoc"), "CARGO_TARGET_DIR="+target)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("testbuild: cargo %s in %s: %v\n%s", strings.Join(args, " "), crateDir, err, out)
	}
	return out, nil
}

// Rust builds the cdylib crate at crateDir (relative to the repository root,
// e.g. "samples/shipment-notifier-rs", or absolute) for the toolchain's WASI
// target in release mode, copies the module into outDir and returns its path.
func Rust(outDir, crateDir string) (string, error) {
	tc, err := RustToolchain()
	if err != nil {
		return "", err
	}
	if _, err := Cargo(crateDir, "build", "--release", "--target", tc.Target); err != nil {
		return "", err
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	name, err := packageName(filepath.Join(inRepo(root, crateDir), "Cargo.toml"))
	if err != nil {
		return "", err
	}
	target, err := cargoTargetDir()
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(filepath.Join(target, tc.Target, "release", strings.ReplaceAll(name, "-", "_")+".wasm"))
	if err != nil {
		return "", fmt.Errorf("testbuild: %s built no module: %v", crateDir, err)
	}
	out := filepath.Join(outDir, strings.ReplaceAll(strings.TrimPrefix(crateDir, "/"), "/", "_")+".wasm")
	return out, os.WriteFile(out, b, 0o644)
}

// RustBytes builds the crate at crateDir in a temporary directory and
// returns the module's bytes.
func RustBytes(crateDir string) ([]byte, error) {
	return built(func(dir string) (string, error) { return Rust(dir, crateDir) })
}

// packageName reads the name of the [package] of a Cargo.toml.
func packageName(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") {
			section = line
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if ok && section == "[package]" && strings.TrimSpace(key) == "name" {
			return strings.Trim(strings.TrimSpace(value), `"`), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", errors.New("testbuild: " + path + " names no package")
}

// statSources stats every file under the directories (relative to root),
// build outputs aside. The go command caches a test's result keyed by the
// files the test process itself opened or stat'ed; cargo reads the Rust
// sources in a child process, so this makes a change to them re-run the
// tests that build them rather than replay a stale pass.
func statSources(root string, dirs ...string) {
	for _, d := range dirs {
		filepath.WalkDir(inRepo(root, d), func(path string, e os.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if e.IsDir() && e.Name() == "target" {
				return filepath.SkipDir
			}
			os.Stat(path)
			return nil
		})
	}
}

// inRepo is dir under the repository root, or dir itself if absolute.
func inRepo(root, dir string) string {
	if filepath.IsAbs(dir) {
		return dir
	}
	return filepath.Join(root, dir)
}
