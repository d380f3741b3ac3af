package hostkit

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/berthhq/berth/config"
	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/eventlog/jetstream"
	"github.com/nats-io/nats.go"
)

// openEvents opens the event log of store.backend: the Badger log under the data directory, or the
// JetStream log over the host's NATS connection, which it makes first (h.NATS).
func (h *Host) openEvents(ctx context.Context, cfg *config.Config) error {
	if cfg.Store.Backend != config.BackendJetStream {
		l, err := eventlog.Open(cfg.EventLogDir(), eventlog.Options{Logger: h.log, Space: h.Disk})
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
	if h.NATS, err = connectNATS(cfg.Store.JetStream, h.log); err != nil {
		return &OpenError{Part: "NATS connection", Err: err}
	}
	l, err := jetstream.Open(ctx, h.NATS, cfg.EventLogJetStream())
	if err != nil {
		return &OpenError{Part: "event log", Err: err}
	}
	h.Events = l
	h.log.Info("event log on NATS JetStream", "store", cfg.Store.String())
	return nil
}

// connectNATS makes the host's one NATS connection from [store.jetstream]: its servers, credentials
// or nkey seed, TLS files and connect timeout. It reconnects for ever (a NATS server restarting or
// a cluster moving its leader is not the end of the host), logging each loss and return.
func connectNATS(j config.JetStreamConfig, log *slog.Logger) (*nats.Conn, error) {
	opts := []nats.Option{
		nats.Name("berth host"),
		nats.Timeout(j.ConnectTimeout.Std()),
		nats.MaxReconnects(-1),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			log.Warn("NATS connection lost; reconnecting", "error", err)
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
	nc, err := nats.Connect(strings.Join(j.URLs, ","), opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to %s (store.jetstream.urls): %w", strings.Join(j.URLs, ", "), err)
	}
	return nc, nil
}
