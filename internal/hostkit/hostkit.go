// Package hostkit assembles the host: the guard of the data directory's free space, the event log
// (Badger, or NATS JetStream over the host's one NATS connection) and the Badger failure ledger, the WebAssembly sandbox, the subscription engine, the module registry with
// its projections' query store, and the webhook dispatcher, each from its options in the
// configuration (config.Config's EngineOptions, Sandbox, DiskOptions, Hooks and directories).
//
// It is the one place that wiring is written: the binary (cmd/host) opens its host with [Open] and
// serves the REST API over it, and every test that needs a whole host opens the same one, so that the
// choice of a backend, or the order parts open in, cannot differ between what runs and what is tested.
//
// The files: hostkit.go (the Host and Open), nats.go (the event log's backend and the NATS
// connection), close.go (Close), reconfigure.go (the reload path),
// disk.go (the free-space check at start) and errors.go ([OpenError]).
package hostkit

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berthhq/berth/config"
	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/internal/diskspace"
	"github.com/berthhq/berth/jobs"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/ledger/webhook"
	"github.com/berthhq/berth/registry"
	"github.com/berthhq/berth/sandbox"
	"github.com/berthhq/berth/subscription"
	"github.com/nats-io/nats.go"
)

// Options are what a host takes beside its configuration. The zero value is the binary's: real time,
// real free space, the compilation cache under the data directory, logs discarded.
type Options struct {
	// Logger receives the log of every part (default: discarded).
	Logger *slog.Logger
	// Clock is the engine's source of time for every wait of the failure model (default: real time);
	// tests drive a subscription.FakeClock.
	Clock subscription.Clock
	// Jitter returns a number in [0, 1) for the engine's backpressure jitter (default: random); tests
	// return 0 for waits they can predict.
	Jitter func() float64
	// Statfs tells the free bytes of the data directory's filesystem (default: statfs(2)); tests inject
	// a full disk with it.
	Statfs func(dir string) (int64, error)
	// WasmCacheDir is the sandbox's compilation cache (default: config's, <data-dir>/wasm-cache);
	// tests that open many hosts share one so that each module compiles once.
	WasmCacheDir string
	// HTTPTransport sends the guests' outbound requests (default: the sandbox's own).
	HTTPTransport http.RoundTripper
}

// Host is an open host: its parts, each opened by [Open] and closed by [Host.Close]. The fields are set
// once, by Open; read them, do not replace them.
type Host struct {
	// Disk guards the data directory's free space; the stores ask it before each write.
	Disk *diskspace.Guard
	// Events is the event log: the Badger log under the data directory, or the JetStream log over NATS
	// (store.backend).
	Events eventlog.Log
	// NATS is the host's one connection to NATS, made from [store.jetstream] when store.backend is
	// "jetstream" (nil otherwise). Every part on JetStream shares it; Close closes it last.
	NATS *nats.Conn
	// Ledger is the failure ledger (parked aggregates, checkpoints, read models, the webhook outbox).
	Ledger ledger.Store
	// Sandbox runs the modules.
	Sandbox *sandbox.Sandbox
	// Engine runs the subscriptions; it is started when Open returns.
	Engine *subscription.Engine
	// Projections is the query store of the projections' read models.
	Projections *registry.Projections
	// Modules is the registry of deployed modules.
	Modules *registry.Registry
	// Jobs runs the operators' bulk resume and skip jobs.
	Jobs *jobs.Runner
	// Hooks delivers the webhooks, on goroutines of its own.
	Hooks *webhook.Dispatcher

	log      *slog.Logger
	cfg      atomic.Pointer[config.Config]
	reloadMu sync.Mutex // one Reconfigure at a time

	stopHooks context.CancelFunc
	hooksWG   sync.WaitGroup
	// stopModuleWatch ends the following of a shared module store (nats.go).
	stopModuleWatch context.CancelFunc
	moduleWatchWG   sync.WaitGroup
	// stopRetention ends the retention sweep (retention.go).
	stopRetention context.CancelFunc
	retentionWG   sync.WaitGroup

	closeMu sync.Mutex
	closed  bool
}

// Open opens a host over cfg, which must validate, in dependency order: the free-space guard of
// cfg.Server.DataDir (made if missing; below store.min-free the host does not open, since a store
// opened on a full disk writes on open and dies of SIGBUS), the event log and the ledger, the sandbox,
// the engine, the projections' query store and the registry (which loads the stored modules and adds
// their subscriptions), then it starts the engine and the webhook dispatcher. A part that fails is
// named by the [*OpenError] returned, and whatever was opened before it is closed (within
// server.shutdown-timeout), so that the same directory can be opened again.
func Open(ctx context.Context, cfg *config.Config, opts Options) (*Host, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if err := cfg.Validate(); err != nil {
		return nil, &OpenError{Part: "configuration", Err: err}
	}
	h := &Host{log: opts.Logger}
	h.cfg.Store(cfg)
	if err := h.open(ctx, cfg, opts); err != nil {
		// Not ctx, which may be what ended the open: the stores opened must
		// still be flushed and unlocked, within server.shutdown-timeout.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.Server.ShutdownTimeout.Std())
		defer cancel()
		if cerr := h.Close(cctx); cerr != nil {
			h.log.Error("closing after a failed open", "error", cerr)
		}
		return nil, err
	}
	return h, nil
}

// open opens each part in turn; Open closes the ones opened when it fails.
func (h *Host) open(ctx context.Context, cfg *config.Config, opts Options) error {
	var err error
	if h.Disk, err = openDisk(cfg, opts); err != nil {
		return &OpenError{Part: "data directory", Err: err}
	}
	if err := h.openEvents(ctx, cfg); err != nil {
		return err
	}
	if h.Ledger, err = ledger.Open(cfg.LedgerDir(), ledger.Options{Logger: h.log, Space: h.Disk}); err != nil {
		return &OpenError{Part: "ledger", Err: err}
	}
	// Held open, so that a data directory removed under the host is noticed.
	if err := h.Disk.Watch(cfg.LedgerDir()); err != nil {
		return &OpenError{Part: "data directory", Err: err}
	}
	sb := cfg.Sandbox()
	sb.Logger = h.log
	sb.HTTPTransport = opts.HTTPTransport
	if opts.WasmCacheDir != "" {
		sb.CacheDir = opts.WasmCacheDir
	}
	if h.Sandbox, err = sandbox.New(sb); err != nil {
		return &OpenError{Part: "sandbox", Err: err}
	}
	eng, err := cfg.EngineOptions()
	if err != nil {
		return &OpenError{Part: "engine", Err: err}
	}
	eng.Logger, eng.Clock, eng.Jitter = h.log, opts.Clock, opts.Jitter
	if h.Engine, err = subscription.Open(h.Events, h.Ledger, eng); err != nil {
		return &OpenError{Part: "engine", Err: err}
	}
	h.Projections = registry.NewProjections(h.Ledger, func() int { return h.Config().Subscription.ProjectionWriters }, h.log)
	store, err := h.openModuleStore(ctx, cfg)
	if err != nil {
		return &OpenError{Part: "modules", Err: err}
	}
	if h.Modules, err = registry.Open(ctx, registry.Options{Dir: cfg.ModulesDir(), Store: store, Sandbox: h.Sandbox,
		Engine: h.Engine, Config: h.Config, Logger: h.log, Space: h.Disk, Projections: h.Projections}); err != nil {
		return &OpenError{Part: "modules", Err: err}
	}
	if h.NATS != nil {
		h.startModuleWatch()
	}
	if err := h.Engine.Start(ctx); err != nil {
		return &OpenError{Part: "engine", Err: err}
	}
	if h.Jobs, err = jobs.Open(ctx, jobs.Options{Ledger: h.Ledger, Engine: h.Engine, Clock: opts.Clock, Logger: h.log,
		ItemTimeout: func() time.Duration { return h.Config().Server.OperatorWait.Std() }}); err != nil {
		return &OpenError{Part: "jobs", Err: err}
	}
	h.startHooks(cfg)
	h.startRetention(opts.Clock)
	return nil
}

// startHooks runs the webhook dispatcher. It reads the ledger's outbox on goroutines of its own: a hook
// that is down never holds up event handling.
func (h *Host) startHooks(cfg *config.Config) {
	h.Hooks = webhook.New(h.Ledger, webhook.Options{Hooks: cfg.Hooks(), Logger: h.log})
	hctx, cancel := context.WithCancel(context.Background())
	h.stopHooks = cancel
	h.hooksWG.Add(1)
	go func() {
		defer h.hooksWG.Done()
		if err := h.Hooks.Run(hctx); err != nil && !errors.Is(err, context.Canceled) {
			h.log.Error("webhooks stopped", "error", err)
		}
	}()
}

// Config returns the running configuration: the one Open was given, or the last one
// [Host.Reconfigure] accepted. It is safe to call from any goroutine; do not modify what it returns.
func (h *Host) Config() *config.Config { return h.cfg.Load() }
