package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/berthhq/berth/api"
	"github.com/berthhq/berth/config"
	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/internal/diskspace"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/ledger/webhook"
	"github.com/berthhq/berth/registry"
	"github.com/berthhq/berth/sandbox"
	"github.com/berthhq/berth/subscription"
)

// serve runs the host until SIGINT or SIGTERM; SIGHUP reloads the config.
func serve(args []string) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	configPath := fs.String("config", "", "configuration file (default: <data>/berth.toml, written with commented defaults if missing)")
	dataDir := fs.String("data", "", "data directory (overrides server.data-dir)")
	listen := fs.String("listen", "", "listen address (overrides server.listen)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	h, err := start(*configPath, *dataDir, *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "berth:", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		for range hup {
			if err := h.reload(); err != nil {
				h.log.Error("config reload refused; the running configuration stays", "error", err)
			}
		}
	}()
	err = h.run(ctx)
	sctx, cancel := h.stopContext()
	defer cancel()
	if cerr := h.close(sctx); cerr != nil {
		// One line, for whoever restarts the host: what it could not flush.
		h.log.Error("shutdown did not finish", "error", cerr)
		fmt.Fprintf(os.Stderr, "berth: shutdown did not finish within server.shutdown-timeout (%s): %s\n",
			h.config().Server.ShutdownTimeout, oneLine(cerr.Error()))
		return 1
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		h.log.Error("server stopped", "error", err)
		return 1
	}
	return 0
}

// host is the running process: its stores, sandbox, engine and API.
type host struct {
	configPath string
	overrides  func(*config.Config)
	cfg        atomic.Pointer[config.Config]
	reloadMu   sync.Mutex
	log        *slog.Logger
	level      slog.LevelVar // log.level, applied again on reload

	disk      *diskspace.Guard // free space and the data directory itself
	events    *eventlog.Badger
	ledger    *ledger.Badger
	sandbox   *sandbox.Sandbox
	engine    *subscription.Engine
	modules   *registry.Registry
	hooks     *webhook.Dispatcher
	hooksWG   sync.WaitGroup
	stopHooks context.CancelFunc
	api       *api.Server
	ln        net.Listener
	ready     atomic.Bool

	// stopMu guards stopCtx, the deadline of a shutdown under way: one
	// server.shutdown-timeout for the requests, the engine and the stores.
	stopMu   sync.Mutex
	stopCtx  context.Context
	stopDone context.CancelFunc
}

func start(configPath, dataDir, listen string) (*host, error) {
	overrides := func(c *config.Config) {
		if dataDir != "" {
			c.Server.DataDir = dataDir
		}
		if listen != "" {
			c.Server.Listen = listen
		}
	}
	if configPath == "" {
		dir := dataDir
		if dir == "" {
			dir = config.Default().Server.DataDir
		}
		configPath = filepath.Join(dir, "berth.toml")
		if _, err := os.Stat(configPath); errors.Is(err, os.ErrNotExist) {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, err
			}
			if err := os.WriteFile(configPath, config.DefaultTOML(), 0o644); err != nil {
				return nil, err
			}
		}
	}
	cfg, err := loadConfig(configPath, overrides)
	if err != nil {
		return nil, err
	}
	h := &host{configPath: configPath, overrides: overrides}
	h.cfg.Store(cfg)
	h.level.Set(cfg.Log.SlogLevel())
	h.log = newLogger(cfg, &h.level)
	h.log.Info("configuration loaded", "file", configPath)
	if cfg.RequireLoopback() {
		h.log.Warn("no auth tokens are configured: every request is allowed, so the server listens on loopback only; add [[auth.tokens]] to serve other hosts", "listen", cfg.Server.Listen)
	}
	if err := h.open(cfg); err != nil {
		ctx, cancel := context.WithTimeout(context.Background(), cfg.Server.ShutdownTimeout.Std())
		defer cancel()
		if cerr := h.close(ctx); cerr != nil {
			h.log.Error("closing after a failed start", "error", cerr)
		}
		return nil, err
	}
	return h, nil
}

func loadConfig(path string, overrides func(*config.Config)) (*config.Config, error) {
	cfg, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	overrides(cfg)
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

func newLogger(cfg *config.Config, level *slog.LevelVar) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if cfg.Log.Format == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}

// open brings the host up in dependency order: stores, sandbox, engine,
// modules (which add their subscriptions), then delivery and the API.
func (h *host) open(cfg *config.Config) error {
	data := cfg.Server.DataDir
	ctx := context.Background()
	var err error
	if h.disk, err = openDisk(cfg, h.log); err != nil {
		return err
	}
	eventsDir, ledgerDir := filepath.Join(data, "events"), filepath.Join(data, "ledger")
	if h.events, err = eventlog.Open(eventsDir, eventlog.Options{Logger: h.log, Space: h.disk}); err != nil {
		return fmt.Errorf("open event log: %w", err)
	}
	if h.ledger, err = ledger.Open(ledgerDir, ledger.Options{Logger: h.log, Space: h.disk}); err != nil {
		return fmt.Errorf("open ledger: %w", err)
	}
	for _, dir := range []string{eventsDir, ledgerDir} {
		if err := h.disk.Watch(dir); err != nil {
			return err
		}
	}
	sbCfg := cfg.Sandbox()
	sbCfg.Logger = h.log
	if h.sandbox, err = sandbox.New(sbCfg); err != nil {
		return err
	}
	classifier, err := cfg.Classifier()
	if err != nil {
		return err
	}
	defaults, _ := cfg.RetryLayers("")
	h.engine, err = subscription.Open(h.events, h.ledger, subscription.Options{
		Partitions:         cfg.Subscription.Partitions,
		Concurrency:        cfg.Subscription.Concurrency,
		Retry:              defaults,
		Parked:             cfg.Parked(""),
		Systemic:           cfg.Systemic(),
		Classifier:         classifier,
		CheckpointEvery:    cfg.Subscription.CheckpointEvery,
		CheckpointInterval: cfg.Subscription.CheckpointInterval.Std(),
		Logger:             h.log,
	})
	if err != nil {
		return err
	}
	if h.modules, err = registry.Open(ctx, registry.Options{Dir: filepath.Join(data, "modules"), Sandbox: h.sandbox,
		Engine: h.engine, Config: h.config, Logger: h.log, Space: h.disk,
		Projections: registry.NewProjections(h.ledger, func() int { return h.config().Subscription.ProjectionWriters }, h.log),
	}); err != nil {
		return err
	}
	if err := h.engine.Start(ctx); err != nil {
		return err
	}
	// Webhooks read the ledger's outbox on their own goroutines: a hook that
	// is down never holds up event handling.
	h.hooks = webhook.New(h.ledger, webhook.Options{Hooks: hooksOf(cfg), Logger: h.log})
	hctx, cancel := context.WithCancel(context.Background())
	h.stopHooks = cancel
	h.hooksWG.Add(1)
	go func() {
		defer h.hooksWG.Done()
		if err := h.hooks.Run(hctx); err != nil && !errors.Is(err, context.Canceled) {
			h.log.Error("webhooks stopped", "error", err)
		}
	}()
	h.api = api.New(api.Deps{Config: h.config, Reload: h.reload, Modules: h.modules, Log: h.events, Engine: h.engine,
		Ledger: h.ledger, Logger: h.log, Ready: h.ready.Load, Sandbox: h.sandbox, Disk: h.disk})
	if h.ln, err = net.Listen("tcp", cfg.Server.Listen); err != nil {
		return err
	}
	h.log.Info("berth is serving", "url", "http://"+h.ln.Addr().String(), "console", "http://"+h.ln.Addr().String()+"/console/", "data", data)
	h.ready.Store(true)
	return nil
}

func (h *host) config() *config.Config { return h.cfg.Load() }

// reload reads the config file again; a file that does not validate is
// refused and the running configuration stays.
func (h *host) reload() error {
	h.reloadMu.Lock()
	defer h.reloadMu.Unlock()
	next, err := loadConfig(h.configPath, h.overrides)
	if err != nil {
		return err
	}
	prev := h.cfg.Load()
	if keys := config.Diff(prev, next); len(keys) > 0 {
		h.log.Warn("these settings change only after a restart", "keys", keys)
	}
	classifier, err := next.Classifier()
	if err != nil {
		return err
	}
	h.cfg.Store(next)
	h.level.Set(next.Log.SlogLevel())
	h.disk.SetReserve(next.Store.MinFree.Bytes())
	defaults, _ := next.RetryLayers("")
	h.engine.SetHostDefaults(defaults, next.Parked(""), classifier)
	if err := h.hooks.SetHooks(hooksOf(next)); err != nil {
		h.log.Error("webhooks kept their previous settings", "error", err)
	}
	if err := h.modules.Reconfigure(context.Background()); err != nil {
		h.log.Error("some modules kept their previous settings", "error", err)
	}
	h.log.Info("configuration reloaded", "file", h.configPath, "changed", config.Changes(prev, next))
	return nil
}

func (h *host) run(ctx context.Context) error {
	cfg := h.config()
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, ReadTimeout: cfg.Server.ReadTimeout.Std(), WriteTimeout: cfg.Server.WriteTimeout.Std(), Handler: h.api.Handler()}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(h.ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		h.log.Info("shutting down")
		sctx, _ := h.stopContext()
		return srv.Shutdown(sctx)
	}
}

// stopContext returns the deadline of the shutdown, starting it on the
// first call: server.shutdown-timeout from then, as the config stands.
func (h *host) stopContext() (context.Context, context.CancelFunc) {
	h.stopMu.Lock()
	defer h.stopMu.Unlock()
	if h.stopCtx == nil {
		h.stopCtx, h.stopDone = context.WithTimeout(context.Background(), h.config().Server.ShutdownTimeout.Std())
	}
	return h.stopCtx, h.stopDone
}

// close stops everything in reverse order of open, within ctx. It returns
// what the stores could not flush and close in time; the engine, webhooks
// and sandbox are only logged, their state being in the stores.
func (h *host) close(ctx context.Context) error {
	if h.engine != nil {
		if err := h.engine.Close(ctx); err != nil {
			h.log.Error("close engine", "error", err)
		}
	}
	if h.hooks != nil {
		h.stopHooks()
		h.hooks.Close(ctx)
		h.hooksWG.Wait()
	}
	if h.sandbox != nil {
		h.sandbox.Close(ctx)
	}
	var errs []error
	if h.ledger != nil {
		errs = append(errs, h.ledger.Close(ctx))
	}
	if h.events != nil {
		errs = append(errs, h.events.Close(ctx))
	}
	if h.disk != nil {
		h.disk.Close()
	}
	return errors.Join(errs...)
}

// hooksOf turns [[webhooks]] into the dispatcher's hooks.
func hooksOf(cfg *config.Config) []webhook.Hook {
	hooks := make([]webhook.Hook, len(cfg.Webhooks))
	for i, w := range cfg.Webhooks {
		hooks[i] = webhook.Hook{Name: w.Name, URL: w.URL, Secret: w.SigningKey(), Events: w.Events, Subscriptions: w.Subscriptions}
	}
	return hooks
}
