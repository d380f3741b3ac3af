package assembly

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/berthhq/berth/config"
	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/eventlog/jetstream"
	"github.com/berthhq/berth/internal/jsapi"
	"github.com/berthhq/berth/registry"
	jsmodules "github.com/berthhq/berth/registry/jetstream"
	"github.com/nats-io/nats.go"
)

// openEvents opens the event log of store.backend: the Badger log under the data directory, or the
// JetStream log over the host's NATS connection, which it makes first (h.NATS).
func (h *Host) openEvents(ctx context.Context, cfg *config.Config) error {
	if cfg.Store.Backend != config.BackendJetStream {
		l, err := eventlog.Open(cfg.EventLogDir(), eventlog.Options{Logger: h.log, Space: h.Disk, SyncWrites: cfg.Store.SyncWrites()})
		if err != nil {
			return &OpenError{Part: "event log", Err: err}
		}
		h.Events = l
		// Held open, so that a data directory removed under the host is noticed.
		if err := h.Disk.Watch(cfg.EventLogDir()); err != nil {
			return &OpenError{Part: "data directory", Err: err}
		}
		return nil
	}
	var err error
	cctx, cancel := openWithin(ctx, cfg)
	defer cancel()
	if h.NATS, err = connectNATS(cctx, cfg.Store.JetStream, h.log); err != nil {
		return &OpenError{Part: "NATS connection", Err: err}
	}
	checkServersSync(h.NATS, cfg.Store.JetStream, h.log)
	octx, cancel := openWithin(ctx, cfg)
	defer cancel()
	l, err := jetstream.Open(octx, h.NATS, cfg.EventLogJetStream())
	if err != nil {
		return &OpenError{Part: "event log", Err: err}
	}
	h.Events = l
	h.log.Info("event log on NATS JetStream", "store", cfg.Store.String())
	return nil
}

// openWithin bounds connecting to NATS, opening the event log and the modules' object store by
// store.jetstream.open-timeout: each waits that long for a cluster that cannot answer yet (forming,
// electing leaders, or other hosts creating the same streams at this moment). The ledger and the
// cluster take the timeout as an option instead: it bounds finding their stream or bucket, not
// catching the ledger's cache up or waiting for a previous run's membership to expire.
func openWithin(ctx context.Context, cfg *config.Config) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, cfg.Store.JetStream.OpenTimeout.Std())
}

// connectNATS makes the host's one NATS connection from [store.jetstream]: its servers, credentials
// or nkey seed, TLS files and connect timeout. While no server takes connections yet (NATS started
// with the hosts, and still starting) it tries again until ctx ends; a refusal (credentials, TLS)
// fails at once. Once connected it reconnects for ever (a NATS server restarting or a cluster
// moving its leader is not the end of the host), logging each loss and return.
func connectNATS(ctx context.Context, j config.JetStreamConfig, log *slog.Logger) (*nats.Conn, error) {
	opts := []nats.Option{
		nats.Name("berth host"),
		nats.Timeout(j.ConnectTimeout.Std()),
		nats.MaxReconnects(-1),
		// A server that went silent counts as lost within a few seconds,
		// not the client's default minutes: the lease must be renewed
		// through another one before it runs out.
		nats.PingInterval(j.PingInterval.Std()),
		nats.MaxPingsOutstanding(j.MaxPingsOut),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			// Close calls this too (with a nil error): the host closing
			// its connection is no loss.
			if !nc.IsClosed() {
				log.Warn("NATS connection lost; reconnecting", "error", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("NATS connection back", "server", nc.ConnectedUrlRedacted())
		}),
	}
	if j.CredentialsFile != "" {
		opts = append(opts, nats.UserCredentials(j.CredentialsFile))
	}
	if j.NkeySeedFile != "" {
		o, err := nats.NkeyOptionFromSeed(j.NkeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("store.jetstream.nkey-seed-file %s: %w", j.NkeySeedFile, err)
		}
		opts = append(opts, o)
	}
	if j.TLSCAFile != "" {
		opts = append(opts, nats.RootCAs(j.TLSCAFile))
	}
	if j.TLSCertFile != "" {
		opts = append(opts, nats.ClientCert(j.TLSCertFile, j.TLSKeyFile))
	}
	told := false
	nc, err := jsapi.Retry(ctx, jsapi.Every(connectPause), func(err error) bool { return errors.Is(err, nats.ErrNoServers) },
		func(context.Context) (*nats.Conn, error) {
			nc, err := nats.Connect(strings.Join(j.URLs, ","), opts...)
			if errors.Is(err, nats.ErrNoServers) && !told {
				log.Info("no NATS server takes connections yet; waiting (store.jetstream.open-timeout)", "urls", j.URLs)
				told = true
			}
			return nc, err
		})
	if err != nil {
		return nil, fmt.Errorf("connect to %s (store.jetstream.urls): %w", strings.Join(j.URLs, ", "), err)
	}
	return nc, nil
}

// connectPause is how long connectNATS waits before it tries the servers again.
const connectPause = 250 * time.Millisecond

// watchRestartPause is how long the module watch waits before it watches
// again after it failed.
const watchRestartPause = time.Second

// openModuleStore returns where the modules are kept: the files under the data directory, or, with
// store.backend "jetstream", the object store every host of the deployment shares (registry/jetstream),
// whose changes each host follows (startModuleWatch).
func (h *Host) openModuleStore(ctx context.Context, cfg *config.Config) (registry.ModuleStore, error) {
	if h.NATS == nil {
		return registry.NewFileStore(cfg.ModulesDir(), h.Disk)
	}
	octx, cancel := openWithin(ctx, cfg)
	defer cancel()
	return jsmodules.Open(octx, h.NATS, jsmodules.Options{Bucket: cfg.Store.JetStream.Stream + "_MODULES",
		Replicas: cfg.Store.JetStream.Replicas, Timeout: cfg.Store.JetStream.ConnectTimeout.Std()})
}

// startModuleWatch deploys here what other hosts upload, roll back or remove (a shared module store
// only).
func (h *Host) startModuleWatch() {
	ctx, cancel := context.WithCancel(context.Background())
	h.stopModuleWatch = cancel
	h.moduleWatchWG.Go(func() {
		_, _ = jsapi.Retry(ctx, jsapi.Every(watchRestartPause), jsapi.Always, func(ctx context.Context) (struct{}, error) {
			err := h.Modules.Watch(ctx)
			if err != nil && ctx.Err() == nil {
				h.log.Warn("watching the shared modules failed; watching again", "error", err)
			}
			return struct{}{}, err
		})
	})
}
