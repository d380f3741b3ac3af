package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/berthhq/berth/internal/diskspace"
	"github.com/berthhq/berth/internal/durable"
)

// stored is a module as kept on disk: <dir>/<name>.wasm and <name>.json
// (the current version), and each kept version under <dir>/versions
// (versions.go).
type StoredModule struct {
	Name     string    `json:"name"`
	SHA256   string    `json:"sha256"`
	Size     int       `json:"size"`
	Uploaded time.Time `json:"uploaded"`
	// Version numbers the module's uploads from 1; 0 in modules stored
	// before versions were kept (read as 1).
	Version int `json:"version,omitempty"`
	// RolledBackFrom is, for a version made by a rollback, the version whose
	// bytes it deployed again.
	RolledBackFrom int `json:"rolledBackFrom,omitempty"`
}

// fileStore keeps module bytes durably under one directory: each file is
// written through internal/durable (a temporary name, fsynced, renamed, the
// directory fsynced), so a crash or a power cut leaves the old version or the
// new one, never half of either, and an upload or a removal that returned is
// on disk. The current bytes are a hard link to the kept version's file, where
// the file system has hard links. A write is refused (with the
// guard's *diskspace.Error) while the data directory is below its reserve.
type fileStore struct {
	dir   string
	space *diskspace.Guard
}

// NewFileStore returns the ModuleStore kept in dir (the host uses
// <data>/modules): <name>.wasm and <name>.json are the current version, each
// kept version is under versions/<name>/. space, if not nil, refuses writes
// below the data directory's reserve.
func NewFileStore(dir string, space *diskspace.Guard) (ModuleStore, error) {
	if err := durable.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return fileStore{dir: dir, space: space}, nil
}

func (fs fileStore) paths(name string) (wasm, meta string) {
	return filepath.Join(fs.dir, name+".wasm"), filepath.Join(fs.dir, name+".json")
}

// Store keeps the version, then makes it current. A current version stored
// before versions were kept is kept first, so that it can be rolled back to.
func (fs fileStore) Store(_ context.Context, s StoredModule, wasm []byte, keep int) error {
	if err := fs.space.Check(); err != nil {
		return fmt.Errorf("registry: module %s not stored: %w", s.Name, err)
	}
	if err := fs.keepOldCurrent(s.Name, keep); err != nil {
		return err
	}
	if err := fs.putVersion(s, wasm, keep); err != nil {
		return err
	}
	wasmPath, metaPath := fs.paths(s.Name)
	meta, err := json.Marshal(s)
	if err != nil {
		return err
	}
	// The current bytes are the version's just kept: a second name of its
	// file, not a second copy (3.4 MB written and fsynced once, not twice).
	version, _ := fs.versionPaths(s.Name, s.Version)
	if err := durable.Link(version, wasmPath); err != nil {
		if err := durable.WriteFile(wasmPath, wasm, 0o644); err != nil {
			return err
		}
		fs.space.Wrote(int64(len(wasm)))
	}
	return durable.WriteFile(metaPath, meta, 0o644)
}

// keepOldCurrent keeps the current version of name among the versions if it
// is not (a module stored by a host that kept no versions).
func (fs fileStore) keepOldCurrent(name string, keep int) error {
	cur, ok, err := fs.currentMeta(name)
	if err != nil || !ok {
		return err
	}
	last, err := fs.lastKept(name)
	if err != nil || cur.Version <= last {
		return err
	}
	// Only now the bytes: on every upload but a host's first after an
	// upgrade, the current version is kept already.
	cur, wasm, ok, err := fs.current(name)
	if err != nil || !ok {
		return err
	}
	return fs.putVersion(cur, wasm, keep)
}

// current reads name's current version, if any.
func (fs fileStore) current(name string) (StoredModule, []byte, bool, error) {
	s, ok, err := fs.currentMeta(name)
	if err != nil || !ok {
		return StoredModule{}, nil, false, err
	}
	wasmPath, _ := fs.paths(name)
	wasm, err := os.ReadFile(wasmPath)
	if err != nil {
		return StoredModule{}, nil, false, err
	}
	return s, wasm, true, nil
}

// currentMeta is current without the module's bytes: what a caller that
// wants the version alone reads (a re-upload of the same bytes asks for
// it, and reading megabytes of wasm for it was most of that upload's time).
func (fs fileStore) currentMeta(name string) (StoredModule, bool, error) {
	_, metaPath := fs.paths(name)
	s, err := readMeta(metaPath)
	if errors.Is(err, os.ErrNotExist) {
		return StoredModule{}, false, nil
	}
	if err != nil {
		return StoredModule{}, false, err
	}
	if s.Version == 0 {
		s.Version = 1 // stored before versions were kept
	}
	return s, true, nil
}

// Remove removes the current files; the kept versions stay.
func (fs fileStore) Remove(_ context.Context, name string) error {
	wasmPath, metaPath := fs.paths(name)
	// The meta file goes first: without it the bytes are not a module.
	if err := durable.Remove(metaPath); err != nil {
		return err
	}
	return durable.Remove(wasmPath)
}

// Current returns every stored module with its bytes.
func (fs fileStore) Current(context.Context) ([]StoredModule, [][]byte, error) {
	entries, err := os.ReadDir(fs.dir)
	if err != nil {
		return nil, nil, err
	}
	var metas []StoredModule
	var codes [][]byte
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || e.IsDir() {
			continue
		}
		s, code, ok, err := fs.current(name)
		if err != nil {
			return nil, nil, err
		}
		if ok {
			metas = append(metas, s)
			codes = append(codes, code)
		}
	}
	return metas, codes, nil
}
