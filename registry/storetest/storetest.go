// Package storetest is the contract suite of registry.ModuleStore: the
// file store and the JetStream object store run it to show they keep
// modules and their versions alike.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/berthhq/berth/registry"
)

// Opener returns a fresh, empty store; opening the same name again must give
// back what was stored under it.
type Opener func(t *testing.T, name string) registry.ModuleStore

// Run runs the suite.
func Run(t *testing.T, open Opener) {
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, Opener)
	}{
		{"StoreAndLoad", testStoreAndLoad},
		{"KeepPrunesOldest", testPrune},
		{"RemoveKeepsVersions", testRemove},
		{"Reopen", testReopen},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open) })
	}
}

func mod(name string, v int) (registry.StoredModule, []byte) {
	wasm := []byte(fmt.Sprintf("\x00asm-%s-v%d", name, v))
	return registry.StoredModule{Name: name, SHA256: fmt.Sprintf("%064d", v), Size: len(wasm), Version: v,
		Uploaded: time.Date(2026, 12, 3, 8, v, 0, 0, time.UTC)}, wasm
}

func store(t *testing.T, s registry.ModuleStore, name string, v, keep int) {
	t.Helper()
	m, wasm := mod(name, v)
	if err := s.Store(context.Background(), m, wasm, keep); err != nil {
		t.Fatalf("store %s v%d: %v", name, v, err)
	}
}

func numbers(t *testing.T, s registry.ModuleStore, name string) []int {
	t.Helper()
	vs, err := s.Versions(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, v := range vs {
		out = append(out, v.Version)
	}
	return out
}

func current(t *testing.T, s registry.ModuleStore) map[string]int {
	t.Helper()
	metas, codes, err := s.Current(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for i, m := range metas {
		_, want := mod(m.Name, m.Version)
		if string(codes[i]) != string(want) {
			t.Errorf("current %s v%d has the bytes %q", m.Name, m.Version, codes[i])
		}
		out[m.Name] = m.Version
	}
	return out
}

func testStoreAndLoad(t *testing.T, open Opener) {
	s := open(t, t.Name())
	ctx := context.Background()
	if n, err := s.LastVersion(ctx, "a"); err != nil || n != 0 {
		t.Fatalf("LastVersion of nothing = %d, %v", n, err)
	}
	store(t, s, "a", 1, 10)
	store(t, s, "a", 2, 10)
	store(t, s, "b", 1, 10)
	if got := current(t, s); got["a"] != 2 || got["b"] != 1 || len(got) != 2 {
		t.Errorf("current = %v, want a v2, b v1", got)
	}
	m, wasm, err := s.Load(ctx, "a", 1)
	_, want := mod("a", 1)
	if err != nil || string(wasm) != string(want) || m.Version != 1 || m.SHA256 != fmt.Sprintf("%064d", 1) ||
		!m.Uploaded.Equal(time.Date(2026, 12, 3, 8, 1, 0, 0, time.UTC)) {
		t.Errorf("Load a v1 = %+v, %q, %v", m, wasm, err)
	}
	if _, _, err := s.Load(ctx, "a", 3); !errors.Is(err, registry.ErrUnknownVersion) {
		t.Errorf("Load a v3: %v, want ErrUnknownVersion", err)
	}
	if got := numbers(t, s, "a"); !slices.Equal(got, []int{1, 2}) {
		t.Errorf("versions of a = %v", got)
	}
	if n, _ := s.LastVersion(ctx, "a"); n != 2 {
		t.Errorf("LastVersion of a = %d", n)
	}
	if got := numbers(t, s, "c"); len(got) != 0 {
		t.Errorf("versions of c = %v", got)
	}
}

func testPrune(t *testing.T, open Opener) {
	s := open(t, t.Name())
	for v := 1; v <= 5; v++ {
		store(t, s, "a", v, 3)
	}
	if got := numbers(t, s, "a"); !slices.Equal(got, []int{3, 4, 5}) {
		t.Errorf("versions kept with keep 3 = %v, want 3 4 5", got)
	}
	if _, _, err := s.Load(context.Background(), "a", 1); !errors.Is(err, registry.ErrUnknownVersion) {
		t.Errorf("Load a pruned version: %v", err)
	}
	store(t, s, "a", 6, 1)
	if got := numbers(t, s, "a"); !slices.Equal(got, []int{6}) {
		t.Errorf("versions kept with keep 1 = %v, want 6", got)
	}
	if n, _ := s.LastVersion(context.Background(), "a"); n != 6 {
		t.Errorf("LastVersion = %d", n)
	}
}

func testRemove(t *testing.T, open Opener) {
	s := open(t, t.Name())
	ctx := context.Background()
	store(t, s, "a", 1, 10)
	store(t, s, "a", 2, 10)
	store(t, s, "b", 1, 10)
	if err := s.Remove(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(ctx, "never"); err != nil {
		t.Errorf("remove what is not there: %v", err)
	}
	if got := current(t, s); len(got) != 1 || got["b"] != 1 {
		t.Errorf("current after removing a = %v", got)
	}
	if got := numbers(t, s, "a"); !slices.Equal(got, []int{1, 2}) {
		t.Errorf("a's versions after its removal = %v, want 1 2", got)
	}
	if n, _ := s.LastVersion(ctx, "a"); n != 2 {
		t.Errorf("LastVersion of a removed module = %d, want 2", n)
	}
	store(t, s, "a", 3, 10)
	if got := current(t, s); got["a"] != 3 {
		t.Errorf("current after storing a again = %v", got)
	}
}

func testReopen(t *testing.T, open Opener) {
	name := t.Name()
	s := open(t, name)
	store(t, s, "a", 1, 10)
	store(t, s, "a", 2, 10)
	s2 := open(t, name)
	if got := current(t, s2); got["a"] != 2 {
		t.Errorf("current after a reopen = %v", got)
	}
	if got := numbers(t, s2, "a"); !slices.Equal(got, []int{1, 2}) {
		t.Errorf("versions after a reopen = %v", got)
	}
}
