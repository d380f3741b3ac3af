package registry

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/berthhq/berth/internal/diskspace"
)

// stored is a module as kept on disk: <dir>/<name>.wasm and <name>.json
// (the current version), and each kept version under <dir>/versions
// (versions.go).
type stored struct {
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

// fileStore keeps module bytes durably: each file is written to a temporary
// name, synced and renamed, so a crash leaves the old version or the new one,
// never half of either. A write is refused (with the guard's
// *diskspace.Error) while the data directory is below its reserve.
type fileStore struct {
	dir   string
	space *diskspace.Guard
}

func (fs fileStore) wasmPath(name string) string { w, _ := fs.paths(name); return w }

func (fs fileStore) paths(name string) (wasm, meta string) {
	return filepath.Join(fs.dir, name+".wasm"), filepath.Join(fs.dir, name+".json")
}

func (fs fileStore) put(s stored, wasm []byte) error {
	wasmPath, metaPath := fs.paths(s.Name)
	meta, err := json.Marshal(s)
	if err != nil {
		return err
	}
	if err := writeAtomic(wasmPath, wasm); err != nil {
		return err
	}
	fs.space.Wrote(int64(len(wasm)))
	return writeAtomic(metaPath, meta)
}

func (fs fileStore) remove(name string) error {
	wasmPath, metaPath := fs.paths(name)
	// The meta file goes first: without it the bytes are not a module.
	if err := os.Remove(metaPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.Remove(wasmPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// list returns every stored module with its bytes.
func (fs fileStore) list() ([]stored, [][]byte, error) {
	entries, err := os.ReadDir(fs.dir)
	if err != nil {
		return nil, nil, err
	}
	var metas []stored
	var codes [][]byte
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || e.IsDir() {
			continue
		}
		wasmPath, metaPath := fs.paths(name)
		s, err := readMeta(metaPath)
		if err != nil {
			return nil, nil, err
		}
		if s.Version == 0 {
			s.Version = 1
		}
		code, err := os.ReadFile(wasmPath)
		if err != nil {
			return nil, nil, err
		}
		metas = append(metas, s)
		codes = append(codes, code)
	}
	return metas, codes, nil
}

func writeAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
