package main

import (
	"context"
	"errors"
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
	"github.com/berthhq/berth/assembly"
	"github.com/berthhq/berth/config"
	"github.com/berthhq/berth/internal/durable"
	"github.com/spf13/cobra"
)

func (a *app) serveCmd() *cobra.Command {
	var configPath, dataDir, listen string
	c := &cobra.Command{
		Use:   "serve",
		Short: "Run the host",
		Long: `Run the host until SIGINT or SIGTERM (a clean shutdown, within server.shutdown-timeout);
SIGHUP reloads the configuration file (a file that does not validate is refused and the
running configuration stays). Without --config, the host reads <data>/berth.toml, and on
the first start writes it there with every key commented, and logs that it did.
The operator verbs reach it at --listen (default server.listen, 127.0.0.1:8080): give
them --server host:port or $BERTH_SERVER.
Exit codes: 0 after a clean shutdown, 1 when it cannot start or its shutdown did not
finish, 2 for a bad flag.`,
		Args: exactArgs(0),
		RunE: func(*cobra.Command, []string) error {
			if code := serve(configPath, dataDir, listen); code != 0 {
				return exitError{code}
			}
			return nil
		},
	}
	c.Flags().StringVar(&configPath, "config", "", "configuration `FILE` (default: <data>/berth.toml, written with commented defaults if missing)")
	c.Flags().StringVar(&dataDir, "data", "", "data directory `DIR` (overrides server.data-dir)")
	c.Flags().StringVar(&listen, "listen", "", "listen address `HOST:PORT` (overrides server.listen)")
	return c
}

// serve runs the host until SIGINT or SIGTERM; SIGHUP reloads the config.
// It returns the exit code.
func serve(configPath, dataDir, listen string) int {
	// The signals are caught before the host starts: a SIGTERM once it
	// says it is serving (or while it opens) must shut it down cleanly,
	// not kill it; one while it opens takes effect once it has.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	h, err := start(configPath, dataDir, listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "berth:", err)
		return 1
	}
	reloads, quit := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(reloads)
		for {
			select {
			case <-hup:
				if err := h.reload(); err != nil {
					h.log.Error("config reload refused; the running configuration stays", "error", err)
				}
			case <-quit:
				return
			}
		}
	}()
	err = h.run(ctx)
	// No reload may race the parts' close: stop taking SIGHUP, and let a
	// reload under way finish first.
	signal.Stop(hup)
	close(quit)
	<-reloads
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

// host is the running process: the host's parts (assembly) and the REST API over them.
type host struct {
	configPath string
	overrides  func(*config.Config)
	reloadMu   sync.Mutex
	log        *slog.Logger
	level      slog.LevelVar // log.level, applied again on reload

	parts *assembly.Host
	api   *api.Server
	ln    net.Listener
	ready atomic.Bool

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
	wrote := false // the first start writes the commented default file, and says so
	if configPath == "" {
		dir := dataDir
		if dir == "" {
			dir = config.Default().Server.DataDir
		}
		configPath = filepath.Join(dir, "berth.toml")
		if _, err := os.Stat(configPath); errors.Is(err, os.ErrNotExist) {
			// Durably: a cut right after the first start must not leave an
			// empty berth.toml that the next start refuses.
			if err := durable.MkdirAll(dir, 0o755); err != nil {
				return nil, err
			}
			if err := durable.WriteFile(configPath, config.DefaultTOML(), 0o644); err != nil {
				return nil, err
			}
			wrote = true
		}
	}
	cfg, err := loadConfig(configPath, overrides)
	if err != nil {
		return nil, err
	}
	h := &host{configPath: configPath, overrides: overrides}
	h.level.Set(cfg.Log.SlogLevel())
	h.log = newLogger(cfg, &h.level)
	if wrote {
		h.log.Info("wrote the default configuration, every key commented: edit it, then send SIGHUP or restart", "file", configPath)
	}
	h.log.Info("configuration loaded", "file", configPath)
	applyMemoryLimit(cfg, h.log)
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

// open brings the host's parts up (assembly.Open), then the API and its
// listener.
func (h *host) open(cfg *config.Config) error {
	metrics := api.NewMetrics()
	parts, err := assembly.Open(context.Background(), cfg, assembly.Options{Logger: h.log, Observer: metrics.Observer()})
	if err != nil {
		return fmt.Errorf("not starting: %w", err)
	}
	h.parts = parts
	deps := api.DepsOf(parts)
	deps.Reload, deps.Logger, deps.Ready, deps.Metrics = h.reload, h.log, h.ready.Load, metrics
	h.api = api.New(deps)
	if h.ln, err = net.Listen("tcp", cfg.Server.Listen); err != nil {
		return err
	}
	h.log.Info("berth is serving", "url", "http://"+h.ln.Addr().String(), "console", "http://"+h.ln.Addr().String()+"/console/", "data", cfg.Server.DataDir)
	h.ready.Store(true)
	return nil
}

// config returns the running configuration (the host's parts own it).
func (h *host) config() *config.Config { return h.parts.Config() }

// reload reads the config file again; a file that does not validate is
// refused and the running configuration stays.
func (h *host) reload() error {
	h.reloadMu.Lock()
	defer h.reloadMu.Unlock()
	next, err := loadConfig(h.configPath, h.overrides)
	if err != nil {
		return err
	}
	if err := h.parts.Reconfigure(next); err != nil {
		return err
	}
	h.level.Set(next.Log.SlogLevel())
	applyMemoryLimit(next, h.log)
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

// close stops the host's parts in reverse order of open, within ctx (see
// assembly.Host.Close); the API has stopped serving by then.
func (h *host) close(ctx context.Context) error {
	if h.parts == nil {
		return nil
	}
	return h.parts.Close(ctx)
}
