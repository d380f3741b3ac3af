package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"runtime/debug"
)

// compiledMarks remembers, beside wazero's on-disk compilation cache, which
// modules that cache holds machine code for: wazero does not say whether a
// compile would hit its cache, and a module whose code is there starts
// compiled (a hit costs less than the interpreter's own compile and the
// calls it would run slowly). A mark is an empty file named after the
// module's cache key and wazero's version, written once the compile is
// done; a mark whose code is gone (a cache emptied by hand) only costs one
// foreground compile, as before tiering.
type compiledMarks struct {
	dir     string
	version string // wazero's, since its cache holds nothing across versions
}

// newCompiledMarks returns the marks under cacheDir; nil without one (then
// nothing is on disk, and every module starts on the interpreter).
func newCompiledMarks(cacheDir string) *compiledMarks {
	if cacheDir == "" {
		return nil
	}
	version := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/tetratelabs/wazero" {
				version = d.Version + d.Sum
			}
		}
	}
	return &compiledMarks{dir: filepath.Join(cacheDir, "berth-compiled"), version: version}
}

func (c *compiledMarks) path(key string) string {
	sum := sha256.Sum256([]byte(c.version + "\x00" + key))
	return filepath.Join(c.dir, hex.EncodeToString(sum[:]))
}

// has says whether the module with cache key key was compiled to disk.
func (c *compiledMarks) has(key string) bool {
	if c == nil {
		return false
	}
	_, err := os.Stat(c.path(key))
	return err == nil
}

// mark records that the module with cache key key is compiled on disk. A
// mark that cannot be written costs the next start its speed, nothing else.
func (c *compiledMarks) mark(key string) {
	if c == nil {
		return
	}
	if os.MkdirAll(c.dir, 0o755) == nil {
		_ = os.WriteFile(c.path(key), nil, 0o644)
	}
}
