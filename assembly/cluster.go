package assembly

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/berthhq/berth/cluster"
	"github.com/berthhq/berth/config"
	"github.com/berthhq/berth/internal/buildinfo"
	"github.com/berthhq/berth/internal/clock"
	"github.com/berthhq/berth/internal/durable"
	"github.com/berthhq/berth/ledger"
	jsledger "github.com/berthhq/berth/ledger/jetstream"
)

// Cluster mode is on exactly when store.backend is "jetstream": every host
// pointed at the same stream S is one deployment. The host then keeps its
// ledger in the stream S_LEDGER (a cache of it under the data directory),
// joins the membership in the KV bucket S_MEMBERS, shares the partitions of
// every subscription with the other hosts (cluster.Cluster tells the engine
// which are its own), and stands for the duties only one host at a time
// does: the jobs, the webhooks and the retention sweep.

// Names of the duties (cluster.Duty) of a host in a cluster.
const (
	dutyJobs      = "jobs"
	dutyWebhooks  = "webhooks"
	dutyRetention = "retention"
)

// openLedger opens the failure ledger of store.backend: the Badger ledger
// under the data directory, or the shared one on JetStream over the host's
// NATS connection (opened by openEvents).
func (h *Host) openLedger(ctx context.Context, cfg *config.Config) error {
	dir := cfg.LedgerDir()
	if h.NATS == nil {
		l, err := ledger.Open(dir, ledger.Options{Logger: h.log, Space: h.Disk, SyncWrites: cfg.Store.SyncWrites()})
		if err != nil {
			return &OpenError{Part: "ledger", Err: err}
		}
		h.Ledger = l
	} else {
		j := cfg.Store.JetStream
		dir = cfg.LedgerCacheDir()
		every, keep := j.LedgerCompaction()
		l, err := jsledger.Open(ctx, h.NATS, jsledger.Options{Stream: j.Stream + "_LEDGER", Subject: j.Stream + "_LEDGER.tx",
			Replicas: j.Replicas, Dir: dir, Space: h.Disk, Logger: h.log, OpenTimeout: j.OpenTimeout.Std(),
			CompactEvery: every, CompactKeep: keep})
		if err != nil {
			return &OpenError{Part: "ledger", Err: err}
		}
		h.Ledger = l
		h.log.Info("ledger on NATS JetStream", "stream", j.Stream+"_LEDGER", "cache", dir)
	}
	// Held open, so that a data directory removed under the host is noticed.
	if err := h.Disk.Watch(dir); err != nil {
		return &OpenError{Part: "data directory", Err: err}
	}
	return nil
}

// incarnationFile, in the data directory, holds the incarnation of this
// host's membership in its last run (cluster.Options.Resume).
const incarnationFile = "cluster-incarnation"

// hostID returns this host's id in the cluster, "" for a single host: the
// engine's Options.Host.
func hostID(cfg *config.Config) (string, error) {
	if cfg.Store.Backend != config.BackendJetStream {
		return "", nil
	}
	return cfg.ClusterHostID()
}

// openCluster joins the deployment, once the engine has started: the
// cluster claims this host's share of the partitions and tells the engine.
// From then on the subscriptions the registry adds are shared out too
// (syncSubscriptions). The duties start later (standForDuties), once the
// jobs runner and the webhook dispatcher are made.
func (h *Host) openCluster(ctx context.Context, cfg *config.Config, clock clock.Clock) error {
	id, err := hostID(cfg)
	if err != nil {
		return &OpenError{Part: "cluster", Err: err}
	}
	// The incarnation of this host's last run, kept in its data directory
	// (one process at a time holds it): a run stopped by a crash or a
	// power cut left its membership key behind, which this run takes over
	// at once rather than waiting out cluster.lease-ttl.
	incarnation := filepath.Join(cfg.Server.DataDir, incarnationFile)
	previous, _ := os.ReadFile(incarnation) // none: the first run, or one that left
	joined := func(inc string) {
		if err := durable.WriteFile(incarnation, []byte(inc), 0o600); err != nil {
			h.log.Warn("cluster: could not keep this run's incarnation; after a crash the next start waits out the lease",
				"file", incarnation, "error", err)
		}
	}
	if h.Cluster, err = cluster.Open(ctx, h.NATS, cluster.Options{
		Resume: strings.TrimSpace(string(previous)), Joined: joined,
		Host: id, Address: cfg.ClusterAddress(), Version: buildinfo.Read().Version,
		Ledger: h.Ledger, Engine: h.Engine, Subscriptions: h.Engine.Subscriptions(),
		Partitions: cfg.Subscription.Partitions, LeaseTTL: cfg.Cluster.LeaseTTL.Std(),
		Bucket: cfg.Store.JetStream.Stream + "_MEMBERS", Replicas: cfg.Store.JetStream.Replicas,
		OpenTimeout: cfg.Store.JetStream.OpenTimeout.Std(),
		Clock:       clock, Logger: h.log,
	}); err != nil {
		return &OpenError{Part: "cluster", Err: err}
	}
	h.log.Info("joined the cluster", "host", id, "address", cfg.ClusterAddress())
	h.syncSubscriptions()
	return nil
}

// standForDuties stands this host for the work one host of the deployment
// at a time does: the jobs, the webhooks and the retention sweep, each run
// while this host holds its duty. The jobs and the webhooks write under the
// duty's claim (its fence), so that once another host took the duty over,
// the ledger refuses this host's writes for it and it acts no more. The
// retention sweep needs none: it only removes what is past keeping, and
// removing it twice removes nothing more.
func (h *Host) standForDuties(ctx context.Context, clock clock.Clock) error {
	for _, d := range []struct {
		name string
		work cluster.DutyFunc
	}{
		{dutyJobs, h.Jobs.Serve},
		{dutyWebhooks, h.runHooksFenced},
		{dutyRetention, func(ctx context.Context, _ ledger.DutyFence) { h.retain(ctx, clock) }},
	} {
		if _, err := h.Cluster.Duty(ctx, d.name, d.work); err != nil {
			return &OpenError{Part: "cluster", Err: fmt.Errorf("duty %s: %w", d.name, err)}
		}
	}
	return nil
}

// subscriptionsAdded is the registry's Options.Added: it asks
// syncSubscriptions to tell the cluster, without blocking the registry.
func (h *Host) subscriptionsAdded() {
	select {
	case h.subsAdded <- struct{}{}:
	default:
	}
}

// syncSubscriptions tells the cluster the engine's subscriptions each time
// the registry added some (a module deployed here or on another host), so
// that their partitions are shared out. Subscriptions are never removed from
// the engine: a module's removal detaches them, and their partitions stay
// owned, their events waiting for a module.
func (h *Host) syncSubscriptions() {
	ctx, cancel := context.WithCancel(context.Background())
	h.stopSubsSync = cancel
	h.subsSyncWG.Go(func() {
		for {
			select {
			case <-h.subsAdded:
			case <-ctx.Done():
				return
			}
			if err := h.Cluster.SetSubscriptions(ctx, h.Engine.Subscriptions()); err != nil && ctx.Err() == nil {
				h.log.Error("telling the cluster of new subscriptions failed", "error", err)
			}
		}
	})
}

// runHooks runs the webhook dispatcher of a single host for its lifetime,
// until ctx ends: unfenced.
func (h *Host) runHooks(ctx context.Context) { h.runHooksFenced(ctx, ledger.DutyFence{}) }

// runHooksFenced runs the webhook dispatcher until ctx ends, in a cluster
// while this host holds the webhooks duty, under its claim.
func (h *Host) runHooksFenced(ctx context.Context, fence ledger.DutyFence) {
	err := h.Hooks.RunFenced(ctx, fence)
	switch {
	case err == nil || errors.Is(err, context.Canceled):
	case errors.Is(err, ledger.ErrFenced):
		h.log.Warn("webhooks stopped here: another host took the webhooks duty over", "error", err)
	default:
		h.log.Error("webhooks stopped", "error", err)
	}
}

// closeCluster leaves the deployment first of all: the duties stop (the
// jobs, the webhooks), and the partitions are stopped and released, so the
// other hosts take them over at once.
func (h *Host) closeCluster(ctx context.Context) {
	if h.stopOperator != nil {
		// First: a call another host forwards must not reach an engine
		// that is closing.
		if err := h.stopOperator(); err != nil {
			h.log.Error("stop answering other hosts' operator calls", "error", err)
		}
	}
	if h.stopSubsSync != nil {
		h.stopSubsSync()
		h.subsSyncWG.Wait()
	}
	if h.Cluster != nil {
		if err := h.Cluster.Close(ctx); err != nil {
			// Its membership then lapses by itself within a lease TTL,
			// and the others take its partitions over after that.
			h.log.Warn("leave the cluster: the others wait out this host's lease", "error", err)
		}
	}
}
