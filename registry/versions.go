package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/berthhq/berth/internal/durable"
)

// DefaultKeepVersions is how many versions of a module the registry keeps,
// the current one included, when store.module-versions is not set (0).
const DefaultKeepVersions = 10

// ErrUnknownVersion: the module has no kept version of that number.
var ErrUnknownVersion = errors.New("unknown module version")

// ErrVersionTaken: a ModuleStore shared by several hosts refused to store a
// version number another host's upload has; the registry numbers again.
var ErrVersionTaken = errors.New("module version number taken by another upload")

// Versions are kept beside the current module, one directory per module:
//
//	<dir>/versions/<name>/<version>.wasm and <version>.json
//
// (names are letters, digits, '-' and '_', so no name is "versions" with a
// ".json" of its own, and list skips directories). Every upload writes its
// version there before it becomes current, so the newest kept version is
// always the current one, or a newer one whose upload did not finish — a
// crash between the two leaves the old current in place, and the next upload
// numbers past it.
func (fs fileStore) versionDir(name string) string { return filepath.Join(fs.dir, "versions", name) }

func (fs fileStore) versionPaths(name string, version int) (wasm, meta string) {
	base := filepath.Join(fs.versionDir(name), strconv.Itoa(version))
	return base + ".wasm", base + ".json"
}

// putVersion keeps s (its Version set) and its bytes, then removes the
// oldest versions beyond keep.
func (fs fileStore) putVersion(s StoredModule, wasm []byte, keep int) error {
	if err := durable.MkdirAll(fs.versionDir(s.Name), 0o755); err != nil {
		return err
	}
	wasmPath, metaPath := fs.versionPaths(s.Name, s.Version)
	meta, err := json.Marshal(s)
	if err != nil {
		return err
	}
	if err := durable.WriteFile(wasmPath, wasm, 0o644); err != nil {
		return err
	}
	fs.space.Wrote(int64(len(wasm)))
	if err := durable.WriteFile(metaPath, meta, 0o644); err != nil {
		return err
	}
	return fs.prune(s.Name, keep)
}

// versionNumbers returns the numbers of the kept versions of name, oldest
// first.
func (fs fileStore) versionNumbers(name string) ([]int, error) {
	entries, err := os.ReadDir(fs.versionDir(name))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range entries {
		base, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			continue
		}
		if v, err := strconv.Atoi(base); err == nil && v > 0 {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Versions returns the kept versions of name, oldest first, and a current
// one stored before versions were kept.
func (fs fileStore) Versions(_ context.Context, name string) ([]StoredModule, error) {
	nums, err := fs.versionNumbers(name)
	if err != nil {
		return nil, err
	}
	out := make([]StoredModule, 0, len(nums)+1)
	for _, v := range nums {
		_, metaPath := fs.versionPaths(name, v)
		s, err := readMeta(metaPath)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	cur, ok, err := fs.currentMeta(name)
	if err != nil {
		return nil, err
	}
	if ok && (len(out) == 0 || out[len(out)-1].Version < cur.Version) {
		out = append(out, cur)
	}
	return out, nil
}

// Load returns one kept version and its bytes, or the current one by its
// number.
func (fs fileStore) Load(_ context.Context, name string, version int) (StoredModule, []byte, error) {
	wasmPath, metaPath := fs.versionPaths(name, version)
	s, err := readMeta(metaPath)
	if errors.Is(err, os.ErrNotExist) {
		if cur, wasm, ok, cerr := fs.current(name); cerr == nil && ok && cur.Version == version {
			return cur, wasm, nil
		}
		return StoredModule{}, nil, fmt.Errorf("%w: %s has no version %d", ErrUnknownVersion, name, version)
	}
	if err != nil {
		return StoredModule{}, nil, err
	}
	wasm, err := os.ReadFile(wasmPath)
	if err != nil {
		return StoredModule{}, nil, err
	}
	return s, wasm, nil
}

// lastKept returns the highest version number kept for name (0 if none).
func (fs fileStore) lastKept(name string) (int, error) {
	nums, err := fs.versionNumbers(name)
	if err != nil || len(nums) == 0 {
		return 0, err
	}
	return nums[len(nums)-1], nil
}

// LastVersion returns the highest version name has had: kept, or current.
func (fs fileStore) LastVersion(_ context.Context, name string) (int, error) {
	last, err := fs.lastKept(name)
	if err != nil {
		return 0, err
	}
	cur, ok, err := fs.currentMeta(name)
	if err != nil {
		return 0, err
	}
	if ok && cur.Version > last {
		last = cur.Version
	}
	return last, nil
}

// prune removes the oldest versions of name beyond keep.
func (fs fileStore) prune(name string, keep int) error {
	nums, err := fs.versionNumbers(name)
	if err != nil {
		return err
	}
	for len(nums) > keep {
		wasmPath, metaPath := fs.versionPaths(name, nums[0])
		// The meta file goes first: without it the bytes are not a version.
		if err := os.Remove(metaPath); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if err := os.Remove(wasmPath); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		nums = nums[1:]
	}
	return nil
}

func readMeta(path string) (StoredModule, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return StoredModule{}, err
	}
	var s StoredModule
	if err := json.Unmarshal(b, &s); err != nil {
		return StoredModule{}, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}
