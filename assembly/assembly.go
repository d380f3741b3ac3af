// Package assembly assembles one Berth host from its configuration: the guard of the data
// directory's free space, the event log and the failure ledger (Badger under the data directory, or
// NATS JetStream over the host's one NATS connection), the WebAssembly sandbox, the subscription
// engine, the module registry with its projections' query store, the jobs runner and the webhook
// dispatcher, and — with JetStream — the host's place in the cluster, each from its options in
// config.Config.
//
// It is the top of the graph below the REST API and the binary, and the one place that wiring is
// written: the binary (cmd/host) opens its host with [Open] and serves the REST API over it, and every
// test that needs a whole host opens the same one, so that the choice of a backend, or the order parts
// open in, cannot differ between what runs and what is tested. It owns that order (open and Close),
// the reload path, the retention sweep and the free-space check at start; each part owns its state.
package assembly

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berthhq/berth/cluster"
	"github.com/berthhq/berth/config"
	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/internal/buildinfo"
	"github.com/berthhq/berth/internal/clock"
	"github.com/berthhq/berth/internal/diskspace"
	"github.com/berthhq/berth/internal/tracing"
	"github.com/berthhq/berth/jobs"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/registry"
	"github.com/berthhq/berth/sandbox"
	"github.com/berthhq/berth/subscription"
	"github.com/berthhq/berth/webhook"
	"github.com/nats-io/nats.go"
)

// Options are what a host takes beside its configuration. The zero value is the binary's: real time,
// real free space, the compilation cache under the data directory, logs discarded.
type Options struct {
	// Logger receives the log of every part (default: discarded).
	Logger *slog.Logger
	// Clock is the host's one source of time (default: real time), handed to every part that times
	// behaviour: the engine's waits of the failure model, the cluster's leases, jobs, retention, the
	// registry's upload times and resync, webhook attempts and signatures, the disk guard's readings.
	// The sandbox keeps real time on purpose: a guest's deadline is CPU the host really spends. Tests
	// drive a clock.Fake.
	Clock clock.Clock
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
	// Observer is told what the engine does, for metrics (api.Metrics.Observer); nil: none.
	Observer subscription.Observer
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
	// Ledger is the failure ledger (parked aggregates, checkpoints, read models, the webhook outbox,
	// jobs): the Badger ledger under the data directory, or the JetStream ledger every host of the
	// deployment shares (store.backend).
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
	// Hooks delivers the webhooks, on goroutines of its own (in a cluster, on the host that holds
	// the webhooks duty only).
	Hooks *webhook.Dispatcher
	// Cluster is this host's place in the deployment when store.backend is "jetstream": its
	// membership, the partitions it owns and the duties it stands for (nil on a single host).
	Cluster *cluster.Cluster
	// Operator makes the operator calls (resume, skip, pause, reset) of the REST API and of the
	// jobs: the engine on a single host; in a cluster a cluster.Forwarder over it, which acts
	// where each call must — on the aggregate's owner, or on every host (operator.go).
	Operator subscription.Operator
	// stopOperator ends the Forwarder's answering the other hosts' calls (closeCluster).
	stopOperator func() error
	// Tracer sends the engine's spans to [tracing] otlp-endpoint (nil: tracing off); Close flushes it.
	Tracer *tracing.Tracer

	log      *slog.Logger
	cfg      atomic.Pointer[config.Config]
	reloadMu sync.Mutex // one Reconfigure at a time

	stopHooks context.CancelFunc
	hooksWG   sync.WaitGroup
	// subsAdded asks for the engine's subscriptions to be told to the cluster (cluster.go).
	subsAdded    chan struct{}
	stopSubsSync context.CancelFunc
	subsSyncWG   sync.WaitGroup
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
// their subscriptions), then it starts the engine, the jobs runner and the webhook dispatcher — or,
// in a cluster (store.backend "jetstream"), joins it: the cluster gives the engine its partitions,
// and the jobs, the webhooks and the retention sweep run on the host holding their duty. A part that fails is
// named by the [*OpenError] returned, and whatever was opened before it is closed (within
// server.shutdown-timeout), so that the same directory can be opened again.
func Open(ctx context.Context, cfg *config.Config, opts Options) (*Host, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if err := cfg.Validate(); err != nil {
		return nil, &OpenError{Part: "configuration", Err: err}
	}
	h := &Host{log: opts.Logger, subsAdded: make(chan struct{}, 1)}
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
	if err := h.openLedger(ctx, cfg); err != nil {
		return err
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
	eng.Logger, eng.Clock, eng.Jitter, eng.Observer = h.log, opts.Clock, opts.Jitter, opts.Observer
	if h.Tracer, err = tracing.Open(cfg.Tracing.Settings(buildinfo.Read().Version)); err != nil {
		return &OpenError{Part: "tracing", Err: err}
	}
	if h.Tracer != nil {
		eng.Tracer = h.Tracer
		h.log.Info("tracing on: spans sent over OTLP/HTTP", "endpoint", cfg.Tracing.OTLPEndpoint, "sampleRatio", cfg.Tracing.SampleRatio)
	}
	// In a cluster the engine delivers only the partitions the cluster
	// gives it, from its start.
	if eng.Host, err = hostID(cfg); err != nil {
		return &OpenError{Part: "cluster", Err: err}
	}
	if h.Engine, err = subscription.Open(h.Events, h.Ledger, eng); err != nil {
		return &OpenError{Part: "engine", Err: err}
	}
	h.Projections = registry.NewProjections(h.Ledger, func() int { return h.Config().Subscription.ProjectionWriters }, h.log)
	store, err := h.openModuleStore(ctx, cfg)
	if err != nil {
		return &OpenError{Part: "modules", Err: err}
	}
	if h.Modules, err = registry.Open(ctx, registry.Options{Dir: cfg.ModulesDir(), Store: store, Sandbox: h.Sandbox,
		Engine: h.Engine, Settings: h.settings, Logger: h.log, Space: h.Disk, Projections: h.Projections,
		Added: h.subscriptionsAdded, Clock: opts.Clock}); err != nil {
		return &OpenError{Part: "modules", Err: err}
	}
	if h.NATS != nil {
		h.startModuleWatch()
	}
	if err := h.Engine.Start(ctx); err != nil {
		return &OpenError{Part: "engine", Err: err}
	}
	if h.NATS != nil {
		if err := h.openCluster(ctx, cfg, opts.Clock); err != nil {
			return err
		}
	}
	if h.Operator, h.stopOperator, err = openOperator(h.Engine, h.Cluster, h.NATS, h.Config, h.log); err != nil {
		return err
	}
	if h.Jobs, err = jobs.Open(ctx, jobs.Options{Ledger: h.Ledger, Engine: h.Operator, Clock: opts.Clock, Logger: h.log,
		ItemTimeout: func() time.Duration { return h.Config().Server.OperatorWait.Std() }, Shared: h.Cluster != nil,
		Deployed: func(name string) (string, bool) {
			info, ok := h.Modules.Get(name)
			return info.SHA256, ok
		}}); err != nil {
		return &OpenError{Part: "jobs", Err: err}
	}
	h.Hooks = webhook.New(h.Ledger, webhook.Options{Hooks: cfg.Hooks(), Logger: h.log, Clock: opts.Clock})
	if h.Cluster != nil {
		return h.standForDuties(ctx, opts.Clock)
	}
	h.startHooks()
	h.startRetention(opts.Clock)
	return nil
}

// startHooks runs the webhook dispatcher (a single host's: in a cluster it is a duty). It reads the
// ledger's outbox on goroutines of its own: a hook that is down never holds up event handling.
func (h *Host) startHooks() {
	hctx, cancel := context.WithCancel(context.Background())
	h.stopHooks = cancel
	h.hooksWG.Go(func() { h.runHooks(hctx) })
}

// Config returns the running configuration: the one Open was given, or the last one
// [Host.Reconfigure] accepted. It is safe to call from any goroutine; do not modify what it returns.
func (h *Host) Config() *config.Config { return h.cfg.Load() }

// settings is the running configuration as the registry reads it.
func (h *Host) settings() registry.Settings { return h.cfg.Load() }
