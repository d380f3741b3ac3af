package registry_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/internal/testing/testbuild"
	"github.com/berthhq/berth/sandbox"
)

// TestUploadWritesItsBytesBesideTheLoad: an upload's bytes are written
// (stage.go) while the sandbox loads them. One that loads is kept under its
// version with nothing else left in the directory; one the sandbox refuses
// leaves no file behind (its staged bytes are removed), and the next
// upload is still version 2.
func TestUploadWritesItsBytesBesideTheLoad(t *testing.T) {
	e := newVersionEnv(t, 10)
	ctx := context.Background()
	dir := filepath.Join(e.cfg.Server.DataDir, "modules", "versions", "notifier")
	files := func() []string {
		entries, _ := os.ReadDir(dir)
		var names []string
		for _, en := range entries {
			names = append(names, en.Name())
		}
		return names
	}
	wasm := bytesOf(t, notifierWasm)
	if info, _, err := e.reg().Put(ctx, "notifier", wasm); err != nil || info.Version != 1 {
		t.Fatalf("upload: %+v, %v", info, err)
	}
	if got := files(); !slices.Equal(got, []string{"1.json", "1.wasm"}) {
		t.Fatalf("after the upload: %v; want 1.json, 1.wasm", got)
	}
	kept, err := os.ReadFile(filepath.Join(dir, "1.wasm"))
	if err != nil || !slices.Equal(kept, wasm) {
		t.Fatalf("1.wasm: %d bytes, %v; want the upload's %d", len(kept), err, len(wasm))
	}

	broken := append(slices.Clone(wasm[:len(wasm)/2]), 0xff) // a wasm header, then a module cut short
	if _, _, err := e.reg().Put(ctx, "notifier", broken); !errors.Is(err, sandbox.ErrInvalidModule) {
		t.Fatalf("a module cut short: %v; want ErrInvalidModule", err)
	}
	checkfor.Nil(t, 10*time.Second, 5*time.Millisecond, func() error {
		if got := files(); !slices.Equal(got, []string{"1.json", "1.wasm"}) {
			return fmt.Errorf("after a refused upload: %v; want 1.json, 1.wasm", got)
		}
		return nil
	})
	if info, _, err := e.reg().Put(ctx, "notifier", testbuild.Rebuilt(wasm, "2")); err != nil || info.Version != 2 {
		t.Fatalf("the next upload: %+v, %v; want version 2", info, err)
	}
}
