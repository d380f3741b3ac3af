package assembly

import (
	"context"
	"errors"
)

// Close closes the host in the reverse order of [Open], within ctx: its place in the cluster (its
// duties end, its partitions are stopped and released to the other hosts), the webhook dispatcher, the engine
// (its handlers' calls end, its checkpoints are written), the query store's background removals, the
// sandbox, the ledger, the event log, the NATS connection and the free-space guard. It returns what the stores could not
// flush and close in time; what the engine, the webhooks and the sandbox could not do is only logged,
// their state being in the stores. A second Close does nothing.
func (h *Host) Close(ctx context.Context) error {
	h.closeMu.Lock()
	defer h.closeMu.Unlock()
	if h.closed {
		return nil
	}
	h.closed = true
	h.closeCluster(ctx)
	if h.stopModuleWatch != nil {
		h.stopModuleWatch()
		h.moduleWatchWG.Wait()
	}
	if h.stopRetention != nil {
		h.stopRetention()
		h.retentionWG.Wait()
	}
	if h.Hooks != nil {
		if h.stopHooks != nil { // a single host's; in a cluster the duty ended with it
			h.stopHooks()
		}
		if err := h.Hooks.Close(ctx); err != nil {
			h.log.Error("close webhooks", "error", err)
		}
		h.hooksWG.Wait()
	}
	if h.Jobs != nil {
		// Before the engine: a job acts through it. Jobs stay running in the
		// ledger and go on at the next start.
		if err := h.Jobs.Close(ctx); err != nil {
			h.log.Error("close jobs", "error", err)
		}
	}
	if h.Engine != nil {
		if err := h.Engine.Close(ctx); err != nil {
			h.log.Error("close engine", "error", err)
		}
	}
	if h.Projections != nil {
		h.Projections.Wait()
	}
	if err := h.Tracer.Close(ctx); err != nil {
		h.log.Warn("close tracing: spans not sent", "error", err)
	}
	if h.Sandbox != nil {
		if err := h.Sandbox.Close(ctx); err != nil {
			h.log.Error("close sandbox", "error", err)
		}
	}
	var errs []error
	if h.Ledger != nil {
		errs = append(errs, h.Ledger.Close(ctx))
	}
	if h.Events != nil {
		errs = append(errs, h.Events.Close(ctx))
	}
	if h.NATS != nil {
		h.NATS.Close()
	}
	if h.Disk != nil {
		h.Disk.Close()
	}
	return errors.Join(errs...)
}
