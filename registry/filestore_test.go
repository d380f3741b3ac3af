package registry_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/berthhq/berth/registry"
	"github.com/berthhq/berth/registry/storetest"
)

// TestFileStore runs the ModuleStore contract suite on the file store.
func TestFileStore(t *testing.T) {
	var mu sync.Mutex
	dirs := map[string]string{}
	storetest.Run(t, func(t *testing.T, name string) registry.ModuleStore {
		mu.Lock()
		dir, ok := dirs[name]
		if !ok {
			dir = filepath.Join(t.TempDir(), strings.ReplaceAll(name, "/", "_"))
			dirs[name] = dir
		}
		mu.Unlock()
		s, err := registry.NewFileStore(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// TestFileStoreWritesBytesOnce: the current bytes are the kept version's
// file under a second name, not a second copy, and stay readable when that
// version is pruned.
func TestFileStoreWritesBytesOnce(t *testing.T) {
	dir := t.TempDir()
	s, err := registry.NewFileStore(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for v, b := range []string{"\x00asm one", "\x00asm two"} {
		if err := s.Store(ctx, registry.StoredModule{Name: "m", Version: v + 1, Size: len(b)}, []byte(b), 1); err != nil {
			t.Fatal(err)
		}
		cur, err := os.Stat(filepath.Join(dir, "m.wasm"))
		if err != nil {
			t.Fatal(err)
		}
		kept, err := os.Stat(filepath.Join(dir, "versions", "m", strconv.Itoa(v+1)+".wasm"))
		if err != nil {
			t.Fatal(err)
		}
		if !os.SameFile(cur, kept) {
			t.Errorf("version %d: the current bytes are a copy of the kept version's, want the same file", v+1)
		}
	}
	ms, codes, err := s.Current(ctx)
	if err != nil || len(ms) != 1 || ms[0].Version != 2 || string(codes[0]) != "\x00asm two" {
		t.Fatalf("current %+v %q %v; want version 2's bytes", ms, codes, err)
	}
}
