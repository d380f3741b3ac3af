package registry_test

import (
	"path/filepath"
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
