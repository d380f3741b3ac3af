package assembly_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/assembly"
	"github.com/berthhq/berth/config"
	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/internal/diskspace"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/internal/testing/natstest"
	"github.com/berthhq/berth/internal/testing/syncbuf"
	"github.com/berthhq/berth/internal/testing/testbuild"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/retry"
	"github.com/berthhq/berth/subscription"
)

// The host's assembly over real parts: Badger stores in a temporary
// directory, the sandbox, the engine, the registry with a compiled sample.

// testConfig is the default configuration over dir, with retries fast
// enough for a test.
func testConfig(dir string) *config.Config {
	cfg := config.Default()
	cfg.Server.DataDir = dir
	cfg.Subscription.CheckpointInterval = retry.Duration(10 * time.Millisecond)
	cfg.Subscription.Retry.InitialBackoff = retry.Duration(time.Millisecond)
	cfg.Subscription.Retry.MaxBackoff = retry.Duration(time.Millisecond)
	return cfg
}

// open opens a host over cfg that the test closes.
func open(t *testing.T, cfg *config.Config, opts assembly.Options) *assembly.Host {
	t.Helper()
	h, err := assembly.Open(t.Context(), cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	return h
}

// TestOpenCloseOpenKeepsState: what one host stored (an event, a deployed
// module and its subscription, a checkpoint) is there when a host is
// opened again on the same directory.
func TestOpenCloseOpenKeepsState(t *testing.T) {
	wasm, err := testbuild.Bytes("samples/shipment-notifier")
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t.TempDir())
	ctx := t.Context()
	h, err := assembly.Open(ctx, cfg, assembly.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.Modules.Put(ctx, "shipment-notifier", wasm); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Events.Append(ctx, eventlog.AppendRequest{AggregateType: "Order", AggregateID: "o-1",
		ExpectedVersion: eventlog.AnyVersion, Events: []eventlog.Event{{Type: "OrderPlaced", Payload: []byte(`{}`)}}}); err != nil {
		t.Fatal(err)
	}
	const sub = "ShipmentNotifier.onOrderShipped"
	checkfor.Eventually(t, func() error {
		st, err := h.Engine.Status(ctx, sub)
		if err == nil && st.Lag != 0 {
			err = fmt.Errorf("the subscription %d events behind, checkpoint %d", st.Lag, st.Checkpoint)
		}
		return err
	})
	if err := h.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(ctx); err != nil {
		t.Errorf("a second Close: %v", err)
	}

	h = open(t, cfg, assembly.Options{})
	if head, err := h.Events.Head(ctx); err != nil || head != 1 {
		t.Errorf("head after reopening = %d, %v; want 1", head, err)
	}
	if list := h.Modules.List(); len(list) != 1 || list[0].Name != "shipment-notifier" {
		t.Errorf("modules after reopening: %+v", list)
	}
	if _, err := h.Engine.Status(ctx, sub); err != nil {
		t.Errorf("subscription after reopening: %v", err)
	}
	var cp uint64
	var ok bool
	if err := h.Ledger.View(ctx, func(tx ledger.Tx) (err error) {
		cp, ok, err = tx.Checkpoint(sub)
		return err
	}); err != nil || !ok || cp != 2 {
		t.Errorf("checkpoint after reopening = %d, %v, %v; want 2, past the event", cp, ok, err)
	}
}

// TestOpenRefusedBelowTheReserve: below store.min-free the host does not
// open, says so naming the directory and the setting, and leaves nothing
// open; with space back it opens.
func TestOpenRefusedBelowTheReserve(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	free := func(n int64) func(string) (int64, error) {
		return func(string) (int64, error) { return n, nil }
	}
	_, err := assembly.Open(t.Context(), cfg, assembly.Options{Statfs: free(cfg.Store.MinFree.Bytes() - 1)})
	var oe *assembly.OpenError
	if !errors.As(err, &oe) || oe.Part != "data directory" || !errors.Is(err, diskspace.ErrLow) {
		t.Fatalf("Open below the reserve: %v; want an OpenError of the data directory matching diskspace.ErrLow", err)
	}
	for _, want := range []string{dir, "below the reserve of 512.0MiB", "store.min-free"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
	if _, err := os.Stat(cfg.EventLogDir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the event log was made below the reserve: %v", err)
	}
	h := open(t, cfg, assembly.Options{Statfs: free(cfg.Store.MinFree.Bytes())})
	if st := h.Disk.Status(); !st.Writable() {
		t.Errorf("disk status at the reserve: %+v", st)
	}
}

// TestOpenFailureNamesThePartAndClosesTheRest: a part that cannot open is
// named, and what opened before it is closed: once the cause is removed,
// the same directory opens (Badger locks an open store's directory).
func TestOpenFailureNamesThePartAndClosesTheRest(t *testing.T) {
	tests := []struct {
		part     string
		path     func(*config.Config) string // made a file, where the part wants a directory
		wantHead uint64                      // the event log's head after: 0 when it was the one removed
	}{
		{"event log", (*config.Config).EventLogDir, 0},
		{"ledger", (*config.Config).LedgerDir, 1},
		{"sandbox", (*config.Config).WasmCacheDir, 1},
		{"modules", (*config.Config).ModulesDir, 1},
	}
	for _, tt := range tests {
		t.Run(tt.part, func(t *testing.T) {
			cfg := testConfig(t.TempDir())
			// The stores that open before the broken part hold data.
			h := open(t, cfg, assembly.Options{})
			if _, err := h.Events.Append(t.Context(), eventlog.AppendRequest{AggregateType: "Order", AggregateID: "o-1",
				ExpectedVersion: eventlog.AnyVersion, Events: []eventlog.Event{{Type: "OrderPlaced"}}}); err != nil {
				t.Fatal(err)
			}
			if err := h.Close(t.Context()); err != nil {
				t.Fatal(err)
			}
			path := tt.path(cfg)
			if err := os.RemoveAll(path); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte("not a directory"), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := assembly.Open(t.Context(), cfg, assembly.Options{})
			var oe *assembly.OpenError
			if !errors.As(err, &oe) || oe.Part != tt.part || !strings.HasPrefix(err.Error(), "open "+tt.part+": ") {
				t.Fatalf("Open with %s a file: %v; want an OpenError of the %s", path, err, tt.part)
			}
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			h = open(t, cfg, assembly.Options{})
			if head, err := h.Events.Head(t.Context()); err != nil || head != tt.wantHead {
				t.Errorf("head after the failed open = %d, %v; want %d", head, err, tt.wantHead)
			}
		})
	}
}

// TestReconfigureRefusesABadClassifier: a configuration whose classifier
// rule names a berth.* class that is not builtin is refused, and the
// host goes on with the running one: the configuration, the retry layer and
// the classifier (a Flaky failure still parks at once). A good one applies.
func TestReconfigureRefusesABadClassifier(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.ClassifierConfig.Rules = []retry.Rule{{Class: "Flaky", As: "unrecoverable"}}
	h := open(t, cfg, assembly.Options{})
	ctx := t.Context()
	const sub = "Test.flaky"
	if err := h.Engine.Add(ctx, subscription.Spec{Name: sub, Invoker: subscription.InvokerFunc(
		func(context.Context, subscription.Delivery) *retry.Failure {
			return &retry.Failure{Classes: []string{"Flaky"}, Message: "flaky"}
		})}); err != nil {
		t.Fatal(err)
	}
	// parkedAfter appends an event of id and returns the attempts its park took.
	parkedAfter := func(id string) int {
		t.Helper()
		if _, err := h.Events.Append(ctx, eventlog.AppendRequest{AggregateType: "Order", AggregateID: id,
			ExpectedVersion: eventlog.AnyVersion, Events: []eventlog.Event{{Type: "OrderPlaced"}}}); err != nil {
			t.Fatal(err)
		}
		var rec *ledger.Record
		checkfor.Eventually(t, func() error {
			var err error
			rec, err = h.Engine.Parked(ctx, sub, "Order", id)
			return err
		})
		return rec.Attempts
	}
	if n := parkedAfter("o-1"); n != 1 {
		t.Fatalf("o-1 parked after %d attempts; want 1 (Flaky is unrecoverable)", n)
	}

	bad := *cfg
	bad.ClassifierConfig.Rules = []retry.Rule{{Class: "berth.NoSuchClass", As: "recoverable"}}
	bad.Subscription.Retry.MaxAttempts = 9
	err := h.Reconfigure(&bad)
	if err == nil || !strings.Contains(err.Error(), "berth.NoSuchClass") || !strings.Contains(err.Error(), "classifier.rules[0].class") {
		t.Fatalf("Reconfigure with a rule naming berth.NoSuchClass: %v; want it refused naming the key and the class", err)
	}
	if h.Config() != cfg {
		t.Error("the refused configuration replaced the running one")
	}
	if st, err := h.Engine.Status(ctx, sub); err != nil || st.Policy.MaxAttempts != retry.DefaultMaxAttempts {
		t.Errorf("policy after the refused reload: %+v, %v; want max-attempts %d", st.Policy, err, retry.DefaultMaxAttempts)
	}
	if n := parkedAfter("o-2"); n != 1 {
		t.Errorf("o-2 parked after %d attempts; want 1: the running classifier stays", n)
	}

	good := *cfg
	good.ClassifierConfig.Rules = nil
	good.Subscription.Retry.MaxAttempts = 3
	if err := h.Reconfigure(&good); err != nil {
		t.Fatal(err)
	}
	if h.Config() != &good {
		t.Error("the accepted configuration is not the running one")
	}
	if n := parkedAfter("o-3"); n != 3 {
		t.Errorf("o-3 parked after %d attempts; want 3: without the rule Flaky is retried within the new budget", n)
	}
}

// With store.backend = "jetstream" the host keeps its event log in the
// stream over its NATS connection: what one host appended is there for the
// next, and no Badger event log is made. A NATS server that cannot be
// reached stops the open, naming the connection.
func TestJetStreamBackend(t *testing.T) {
	srv := natstest.RunServer(t)
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.Store.Backend = config.BackendJetStream
	cfg.Store.JetStream.URLs = []string{srv.URL()}
	ctx := t.Context()
	h := open(t, cfg, assembly.Options{})
	if h.NATS == nil || !h.NATS.IsConnected() {
		t.Fatal("the host has no NATS connection")
	}
	if _, err := h.Events.Append(ctx, eventlog.AppendRequest{AggregateType: "Order", AggregateID: "o-1",
		Events: []eventlog.Event{{Type: "OrderPlaced", Payload: []byte(`{}`)}}}); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if !h.NATS.IsClosed() {
		t.Error("Close left the NATS connection open")
	}
	if _, err := os.Stat(cfg.EventLogDir()); !os.IsNotExist(err) {
		t.Errorf("a Badger event log was made: %v", err)
	}
	h = open(t, cfg, assembly.Options{})
	if head, err := h.Events.Head(ctx); err != nil || head != 1 {
		t.Fatalf("Head after reopening = %d, %v; want 1", head, err)
	}
	h.Close(ctx)

	// With no NATS server, the host waits store.jetstream.open-timeout for
	// one, then names the connection and the key.
	srv.Shutdown()
	cfg.Store.JetStream.ConnectTimeout = retry.Duration(200 * time.Millisecond)
	cfg.Store.JetStream.OpenTimeout = retry.Duration(time.Second)
	_, err := assembly.Open(ctx, cfg, assembly.Options{})
	var oe *assembly.OpenError
	if !errors.As(err, &oe) || oe.Part != "NATS connection" || !strings.Contains(err.Error(), "store.jetstream.urls") ||
		!strings.Contains(err.Error(), "tried for") {
		t.Fatalf("open with the NATS server down: %v", err)
	}

	// A server that comes up while the host waits (started with the
	// hosts, as the README's walkthrough does) is taken.
	cfg.Store.JetStream.OpenTimeout = config.DefaultNATSOpenTimeout
	opened := make(chan error, 1)
	waiting := &syncbuf.Buffer{}
	go func() {
		h, err := assembly.Open(ctx, cfg, assembly.Options{Logger: slog.New(slog.NewTextHandler(waiting, nil))})
		if err == nil {
			defer h.Close(ctx)
			var head uint64
			if head, err = h.Events.Head(ctx); err == nil && head != 1 {
				err = fmt.Errorf("head %d, want 1", head)
			}
		}
		opened <- err
	}()
	checkfor.Eventually(t, func() error {
		if log := waiting.String(); !strings.Contains(log, "no NATS server takes connections yet") {
			return fmt.Errorf("the host has not said it waits for NATS; its log: %q", log)
		}
		return nil
	})
	srv.Restart()
	if err := <-opened; err != nil {
		t.Fatalf("open while the NATS server starts: %v", err)
	}
}
