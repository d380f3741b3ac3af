package jetstream_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/berthhq/berth/config"
	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/internal/clock"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/internal/testing/natstest"
	"github.com/berthhq/berth/internal/testing/testbuild"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/registry"
	jsmodules "github.com/berthhq/berth/registry/jetstream"
	"github.com/berthhq/berth/sandbox"
	"github.com/berthhq/berth/subscription"
)

// quietWatch is a real shared store whose watch has gone quiet without
// failing, as a consumer on a server that stopped delivering does: it says
// it is ready and then tells nothing. readied is closed once the watcher's
// ready (the registry's first look at the store) has returned.
type quietWatch struct {
	*shared
	readied chan struct{}
}

// shared names the embedded store apart from its Store method.
type shared = jsmodules.Store

func (q quietWatch) Watch(ctx context.Context, ready func(), _ func(string)) error {
	return q.shared.Watch(ctx, func() { ready(); close(q.readied) }, func(string) {})
}

// TestResyncFindsWhatAQuietWatchMissed: a host whose watch tells it
// nothing still deploys a module another host stored, at its next look at
// the shared store's current versions, resyncEvery (10 s, on its clock)
// after the last.
func TestResyncFindsWhatAQuietWatchMissed(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, b := twoHosts(t, ctx, natstest.RunServer(t).URL())
	wasm, err := testbuild.Bytes("registry/testdata/eachevent")
	if err != nil {
		t.Fatal(err)
	}
	fake := clock.NewFake(time.Now())
	quiet := quietWatch{shared: b, readied: make(chan struct{})}
	reg := openRegistry(t, quiet, fake)
	watched := make(chan error, 1)
	go func() { watched <- reg.Watch(ctx) }()
	select {
	case <-quiet.readied: // the first look is over: only the next one can see the upload
	case <-time.After(10 * time.Second):
		t.Fatal("the registry's watch never became ready")
	}
	if err := fake.BlockUntil(ctx, 1); err != nil { // the next look's timer
		t.Fatal(err)
	}
	if err := a.Store(ctx, registry.StoredModule{Name: "each-event", Version: 1, SHA256: fmt.Sprintf("%x", sha256.Sum256(wasm)), Size: len(wasm)}, wasm, 10); err != nil {
		t.Fatal(err)
	}
	fake.Advance(10 * time.Second)
	checkfor.Nil(t, 20*time.Second, 20*time.Millisecond, func() error {
		if info, ok := reg.Get("each-event"); !ok || info.Version != 1 {
			return fmt.Errorf("deployed %+v (%v), want each-event version 1", info, ok)
		}
		return nil
	})
	cancel()
	if err := <-watched; err != nil && ctx.Err() == nil {
		t.Fatal(err)
	}
}

// openRegistry opens a registry over store, with an engine and a sandbox
// of its own over stores in t's directories, its resync timed by clk.
func openRegistry(t *testing.T, store registry.ModuleStore, clk clock.Clock) *registry.Registry {
	t.Helper()
	ctx := context.Background()
	cfg := config.Default()
	cfg.Server.DataDir = t.TempDir()
	log, err := eventlog.Open(cfg.Server.DataDir+"/log", eventlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close(ctx) })
	led, err := ledger.Open(cfg.Server.DataDir+"/ledger", ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { led.Close(ctx) })
	sb := cfg.Sandbox()
	sb.Logger = slog.New(slog.DiscardHandler)
	box, err := sandbox.New(sb)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { box.Close(ctx) })
	opts, err := cfg.EngineOptions()
	if err != nil {
		t.Fatal(err)
	}
	opts.Logger = slog.New(slog.DiscardHandler)
	eng, err := subscription.Open(log, led, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close(ctx) })
	reg, err := registry.Open(ctx, registry.Options{Dir: cfg.ModulesDir(), Sandbox: box, Engine: eng, Store: store, Clock: clk,
		Settings: func() registry.Settings { return cfg }, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return reg
}
