package registry_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/berthhq/berth/assembly"
	"github.com/berthhq/berth/config"
	"github.com/berthhq/berth/internal/testing/testbuild"
	"github.com/berthhq/berth/registry"
)

var notifierWasm = sync.OnceValues(func() ([]byte, error) { return testbuild.Bytes("samples/shipment-notifier") })

// versionEnv is a host whose registry the version tests drive; reopen
// closes it and opens another on the same data directory.
type versionEnv struct {
	t   *testing.T
	cfg *config.Config
	asm *assembly.Host
}

func newVersionEnv(t *testing.T, keep int) *versionEnv {
	t.Helper()
	cfg := config.Default()
	cfg.Server.DataDir = t.TempDir()
	cfg.Store.ModuleVersions = keep
	e := &versionEnv{t: t, cfg: cfg}
	e.open()
	t.Cleanup(func() { e.asm.Close(context.Background()) })
	return e
}

func (e *versionEnv) open() {
	e.t.Helper()
	asm, err := assembly.Open(context.Background(), e.cfg, assembly.Options{})
	if err != nil {
		e.t.Fatal(err)
	}
	e.asm = asm
}

func (e *versionEnv) reopen() {
	e.t.Helper()
	e.asm.Close(context.Background())
	e.open()
}

func (e *versionEnv) reg() *registry.Registry { return e.asm.Modules }

func bytesOf(t *testing.T, build func() ([]byte, error)) []byte {
	t.Helper()
	b, err := build()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// versionsOf returns the module's kept version numbers, its current one
// and their hashes.
func versionsOf(t *testing.T, r *registry.Registry, name string) (nums []int, current int, sha map[int]string) {
	t.Helper()
	vs, err := r.Versions(name)
	if err != nil {
		t.Fatalf("versions of %s: %v", name, err)
	}
	sha = map[int]string{}
	for _, v := range vs {
		nums = append(nums, v.Version)
		sha[v.Version] = v.SHA256
		if v.Current {
			current = v.Version
		}
	}
	return nums, current, sha
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestModuleVersions: every upload is the module's next version; a rollback
// deploys a kept version's bytes again as the next version; the oldest
// beyond store.module-versions go; all of it survives a restart and a
// delete.
func TestModuleVersions(t *testing.T) {
	ctx := context.Background()
	e := newVersionEnv(t, 3)
	a, b := bytesOf(t, orderSummaryWasm), bytesOf(t, notifierWasm)

	for i, wasm := range [][]byte{a, b, a} {
		info, _, err := e.reg().Put(ctx, "m", wasm)
		if err != nil {
			t.Fatal(err)
		}
		if info.Version != i+1 || info.RolledBackFrom != 0 {
			t.Fatalf("upload %d: version %d, rolled back from %d", i+1, info.Version, info.RolledBackFrom)
		}
	}
	nums, cur, sha := versionsOf(t, e.reg(), "m")
	if !equalInts(nums, []int{1, 2, 3}) || cur != 3 {
		t.Fatalf("versions %v, current %d; want 1 2 3, current 3", nums, cur)
	}
	shaB := sha[2]

	// Roll back to 2: its bytes run again, as version 4; 1 is pruned (3 kept).
	info, err := e.reg().Rollback(ctx, "m", 2)
	if err != nil {
		t.Fatal(err)
	}
	if info.Version != 4 || info.RolledBackFrom != 2 || info.SHA256 != shaB || info.Processor != "ShipmentNotifier" {
		t.Fatalf("after the rollback: %+v; want version 4 from 2, the notifier's bytes", info)
	}
	nums, cur, _ = versionsOf(t, e.reg(), "m")
	if !equalInts(nums, []int{2, 3, 4}) || cur != 4 {
		t.Fatalf("versions %v, current %d; want 2 3 4, current 4", nums, cur)
	}
	if _, err := e.reg().Rollback(ctx, "m", 1); !errors.Is(err, registry.ErrUnknownVersion) {
		t.Errorf("rollback to the pruned version 1: %v, want ErrUnknownVersion", err)
	}
	if _, err := e.reg().Rollback(ctx, "m", 0); !errors.Is(err, registry.ErrUnknownVersion) {
		t.Errorf("rollback to version 0: %v, want ErrUnknownVersion", err)
	}

	// A restart keeps all of it.
	e.reopen()
	got, ok := e.reg().Get("m")
	if !ok || got.Version != 4 || got.RolledBackFrom != 2 || got.SHA256 != shaB {
		t.Fatalf("after a restart: %+v", got)
	}
	if nums, cur, _ = versionsOf(t, e.reg(), "m"); !equalInts(nums, []int{2, 3, 4}) || cur != 4 {
		t.Fatalf("after a restart: versions %v, current %d", nums, cur)
	}

	// A delete keeps the versions; none is current, and a rollback brings
	// the module back; an upload numbers after them.
	if err := e.reg().Delete(ctx, "m"); err != nil {
		t.Fatal(err)
	}
	if nums, cur, _ = versionsOf(t, e.reg(), "m"); !equalInts(nums, []int{2, 3, 4}) || cur != 0 {
		t.Fatalf("after a delete: versions %v, current %d", nums, cur)
	}
	if info, err := e.reg().Rollback(ctx, "m", 3); err != nil || info.Version != 5 || info.Processor != "OrderSummary" {
		t.Fatalf("rollback after a delete: %+v, %v", info, err)
	}
	if _, err := e.reg().Versions("nope"); !errors.Is(err, registry.ErrUnknownModule) {
		t.Errorf("versions of a module never uploaded: %v, want ErrUnknownModule", err)
	}
	if _, err := e.reg().Versions("../x"); !errors.Is(err, registry.ErrInvalidName) {
		t.Errorf("versions of ../x: %v, want ErrInvalidName", err)
	}
}

// TestModuleStoredBeforeVersions: a module stored by a host that kept no
// versions reads as version 1, and the next upload keeps it, so it can be
// rolled back to.
func TestModuleStoredBeforeVersions(t *testing.T) {
	ctx := context.Background()
	e := newVersionEnv(t, 10)
	a, b := bytesOf(t, orderSummaryWasm), bytesOf(t, notifierWasm)
	if _, _, err := e.reg().Put(ctx, "m", a); err != nil {
		t.Fatal(err)
	}
	e.asm.Close(ctx)
	// What an older host left: the current files only, without a version.
	dir := e.cfg.ModulesDir()
	if err := os.RemoveAll(filepath.Join(dir, "versions")); err != nil {
		t.Fatal(err)
	}
	meta, err := os.ReadFile(filepath.Join(dir, "m.json"))
	if err != nil {
		t.Fatal(err)
	}
	old := []byte(`{"name":"m","sha256":"` + sha256Field(t, meta) + `","size":` + sizeField(t, meta) + `,"uploaded":"2025-01-01T00:00:00Z"}`)
	if err := os.WriteFile(filepath.Join(dir, "m.json"), old, 0o644); err != nil {
		t.Fatal(err)
	}
	e.open()
	if info, _ := e.reg().Get("m"); info.Version != 1 {
		t.Fatalf("an unversioned module reads as version %d, want 1", info.Version)
	}
	if nums, cur, _ := versionsOf(t, e.reg(), "m"); !equalInts(nums, []int{1}) || cur != 1 {
		t.Fatalf("versions %v, current %d; want 1, current 1", nums, cur)
	}
	if info, _, err := e.reg().Put(ctx, "m", b); err != nil || info.Version != 2 {
		t.Fatalf("the next upload: %+v, %v; want version 2", info, err)
	}
	info, err := e.reg().Rollback(ctx, "m", 1)
	if err != nil || info.Version != 3 || info.Processor != "OrderSummary" {
		t.Fatalf("rollback to the unversioned 1: %+v, %v", info, err)
	}
}

func sha256Field(t *testing.T, meta []byte) string {
	t.Helper()
	var m struct {
		SHA256 string `json:"sha256"`
	}
	if err := json.Unmarshal(meta, &m); err != nil {
		t.Fatal(err)
	}
	return m.SHA256
}

func sizeField(t *testing.T, meta []byte) string {
	t.Helper()
	var m struct {
		Size int `json:"size"`
	}
	if err := json.Unmarshal(meta, &m); err != nil {
		t.Fatal(err)
	}
	return strconv.Itoa(m.Size)
}

// TestUploadOfTheCurrentBytesChangesNothing: a deployer's PUT of the bytes
// already running answers that version, not created, with no new version
// kept; other bytes, and then the first ones again, are new versions (the
// first bytes are no longer current then).
func TestUploadOfTheCurrentBytesChangesNothing(t *testing.T) {
	e := newVersionEnv(t, 10)
	ctx := context.Background()
	wasm := bytesOf(t, notifierWasm)
	first, created, err := e.reg().Put(ctx, "notifier", wasm)
	if err != nil || !created || first.Version != 1 {
		t.Fatalf("first upload: %+v, created %v, %v", first, created, err)
	}
	again, created, err := e.reg().Put(ctx, "notifier", wasm)
	if err != nil || created || again.Version != 1 || again.SHA256 != first.SHA256 {
		t.Fatalf("the same bytes again: %+v, created %v, %v; want version 1, not created", again, created, err)
	}
	other := testbuild.Rebuilt(wasm, "2")
	if info, _, err := e.reg().Put(ctx, "notifier", other); err != nil || info.Version != 2 {
		t.Fatalf("another build: %+v, %v; want version 2", info, err)
	}
	if info, _, err := e.reg().Put(ctx, "notifier", wasm); err != nil || info.Version != 3 {
		t.Fatalf("the first bytes once another build ran: %+v, %v; want version 3", info, err)
	}
	vs, err := e.reg().Versions("notifier")
	if err != nil || len(vs) != 3 {
		t.Fatalf("versions kept: %+v, %v; want 3", vs, err)
	}
}
