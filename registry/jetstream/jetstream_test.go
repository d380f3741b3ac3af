package jetstream_test

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/internal/testing/natstest"
	"github.com/berthhq/berth/registry"
	jsmodules "github.com/berthhq/berth/registry/jetstream"
	"github.com/berthhq/berth/registry/storetest"
	"github.com/nats-io/nats.go"
)

func connect(t *testing.T, urls string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(urls)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func bucket(name string) string {
	h := fnv.New64a()
	h.Write([]byte(name))
	return fmt.Sprintf("M%x", h.Sum64())
}

func suite(t *testing.T, urls string, replicas int) {
	nc := connect(t, urls)
	storetest.Run(t, func(t *testing.T, name string) registry.ModuleStore {
		s, err := jsmodules.Open(context.Background(), nc, jsmodules.Options{Bucket: bucket(name), Replicas: replicas})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// TestObjectStore runs the ModuleStore contract suite on one NATS node and
// on a three-node cluster with three replicas.
func TestObjectStore(t *testing.T) {
	t.Run("R1", func(t *testing.T) { suite(t, natstest.RunServer(t).URL(), 1) })
	t.Run("R3", func(t *testing.T) { suite(t, natstest.RunCluster(t, 3).URLs(), 3) })
}

// twoHosts opens the default bucket twice, each over a connection of its
// own, as two hosts do.
func twoHosts(t *testing.T, ctx context.Context, url string) (a, b *jsmodules.Store) {
	t.Helper()
	for _, s := range []**jsmodules.Store{&a, &b} {
		var err error
		if *s, err = jsmodules.Open(ctx, connect(t, url), jsmodules.Options{}); err != nil {
			t.Fatal(err)
		}
	}
	return a, b
}

// TestWatchSeesAnotherHost: a module stored or removed through one host's
// store is told to the other's watcher; every change after the watcher says
// it is ready reaches it (what came before, the registry reads then).
func TestWatchSeesAnotherHost(t *testing.T) {
	n := natstest.RunServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, b := twoHosts(t, ctx, n.URL())
	var mu sync.Mutex
	var seen []string
	ready := make(chan struct{})
	go b.Watch(ctx, func() { close(ready) }, func(name string) { mu.Lock(); seen = append(seen, name); mu.Unlock() })
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		t.Fatal("the watch never said it was ready")
	}
	if err := a.Store(ctx, registry.StoredModule{Name: "m", Version: 1, SHA256: "x", Size: 1}, []byte{0}, 10); err != nil {
		t.Fatal(err)
	}
	checkfor.Nil(t, 10*time.Second, 20*time.Millisecond, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(seen) == 0 || seen[len(seen)-1] != "m" {
			return fmt.Errorf("b saw %q, want a's upload of m last", seen)
		}
		return nil
	})
	// The look a registry repeats in case its watch went quiet.
	if vs, err := b.CurrentVersions(ctx); err != nil || len(vs) != 1 || vs[0].Name != "m" || vs[0].Version != 1 {
		t.Errorf("b's current versions: %+v, %v; want m v1", vs, err)
	}
	if m, ok, err := b.CurrentVersion(ctx, "m"); err != nil || !ok || m.Version != 1 {
		t.Errorf("b's current version of m: %+v, %v, %v; want v1", m, ok, err)
	}
	// A module no server has any record of is not "removed": a registry
	// must not undeploy on a server's word that it never saw it.
	if _, ok, err := b.CurrentVersion(ctx, "never-stored"); err == nil || ok {
		t.Errorf("b's current version of a module never stored: %v, %v; want an error", ok, err)
	}
	mu.Lock()
	before := len(seen)
	mu.Unlock()
	if err := a.Remove(ctx, "m"); err != nil {
		t.Fatal(err)
	}
	checkfor.Nil(t, 10*time.Second, 20*time.Millisecond, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(seen) <= before {
			return fmt.Errorf("b saw %q, nothing after a's removal", seen)
		}
		return nil
	})
	metas, _, err := b.Current(ctx)
	if err != nil || len(metas) != 0 {
		t.Errorf("b's current modules after the removal: %+v, %v", metas, err)
	}
	if vs, err := b.CurrentVersions(ctx); err != nil || len(vs) != 0 {
		t.Errorf("b's current versions after the removal: %+v, %v", vs, err)
	}
	if _, ok, err := b.CurrentVersion(ctx, "m"); err != nil || ok {
		t.Errorf("b's current version of m after the removal: %v, %v; want removed", ok, err)
	}
}

// TestVersionTakenOnce: two hosts storing the same version number of one
// module — both counted the same next number — cannot both have it: the
// second is refused with registry.ErrVersionTaken and stores nothing, so
// the version's bytes stay the first's.
func TestVersionTakenOnce(t *testing.T) {
	n := natstest.RunServer(t)
	ctx := t.Context()
	a, b := twoHosts(t, ctx, n.URL())
	first := registry.StoredModule{Name: "m", Version: 1, SHA256: "aaaa", Size: 1}
	if err := a.Store(ctx, first, []byte("a"), 5); err != nil {
		t.Fatal(err)
	}
	second := registry.StoredModule{Name: "m", Version: 1, SHA256: "bbbb", Size: 1}
	if err := b.Store(ctx, second, []byte("b"), 5); !errors.Is(err, registry.ErrVersionTaken) {
		t.Fatalf("storing a taken version: %v, want ErrVersionTaken", err)
	}
	for name, s := range map[string]*jsmodules.Store{"a": a, "b": b} {
		m, wasm, err := s.Load(ctx, "m", 1)
		if err != nil || m.SHA256 != "aaaa" || string(wasm) != "a" {
			t.Fatalf("v1 through %s: %+v %q %v; want the first upload's", name, m, wasm, err)
		}
	}
	second.Version = 2
	if err := b.Store(ctx, second, []byte("b"), 5); err != nil {
		t.Fatalf("the next number: %v", err)
	}
}
