package assembly

import (
	"context"

	"github.com/berthhq/berth/config"
)

// Reconfigure applies a reloaded configuration (SIGHUP, POST /v1/config/reload) to the running host:
// the free-space reserve, the engine's host-wide retry and parked layers and classifier (from the next
// attempt), the webhooks, and every module's settings (each module is loaded again). A configuration
// that does not validate, such as a classifier rule naming a berth.* class that is not builtin, is
// refused with its error and the running one stays, unchanged in every part. Keys that need a restart
// ([config.Diff]) are logged; the host runs with their old values until it restarts.
func (h *Host) Reconfigure(next *config.Config) error {
	h.reloadMu.Lock()
	defer h.reloadMu.Unlock()
	if err := next.Validate(); err != nil {
		return err
	}
	eng, err := next.EngineOptions()
	if err != nil {
		return err
	}
	prev := h.cfg.Load()
	if keys := config.Diff(prev, next); len(keys) > 0 {
		h.log.Warn("these settings change only after a restart", "keys", keys)
	}
	h.cfg.Store(next)
	h.Disk.SetReserve(next.DiskOptions().Reserve)
	h.Engine.SetHostDefaults(eng.Retry, eng.Parked, eng.Classifier)
	if err := h.Hooks.SetHooks(next.Hooks()); err != nil {
		h.log.Error("webhooks kept their previous settings", "error", err)
	}
	if err := h.Modules.Reconfigure(context.Background()); err != nil {
		h.log.Error("some modules kept their previous settings", "error", err)
	}
	h.log.Info("configuration reloaded", "changed", config.Changes(prev, next))
	return nil
}
