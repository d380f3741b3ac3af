package api

import (
	"net/http"

	"github.com/berthhq/berth/api/wire"

	"github.com/berthhq/berth/internal/diskspace"
	"github.com/labstack/echo/v4"
)

// healthz is liveness: the process answers, 200, whatever the disk. It says
// "disk low" or "store cannot write" when writes are refused, since
// restarting the host would not help and reads still work.
func (s *Server) healthz(c echo.Context) error {
	h := wire.Health{Status: wire.HealthOK}
	if s.deps.Disk != nil {
		st := s.deps.Disk.Status()
		h.Disk = &wire.DiskStatus{Dir: st.Dir, Free: st.Free, Reserve: st.Reserve, Writable: st.Writable()}
		switch {
		case st.Err != nil:
			h.Status, h.Disk.Error = wire.HealthCannotWrite, st.Err.Error()
		case st.Low():
			h.Status = wire.HealthDiskLow
		}
	}
	return c.JSON(http.StatusOK, h)
}

// readyz is readiness: 503 while the host starts, while its stores
// cannot write (below the reserve, or the data directory gone), and in a
// cluster while its lease does not let it act (NATS out of reach: it
// calls no handler until the lease is renewed).
func (s *Server) readyz(c echo.Context) error {
	if !s.deps.Ready() {
		return problem(http.StatusServiceUnavailable, "not-ready", "the host is still starting")
	}
	if l, ok := s.deps.Cluster.(leaseHolder); ok && !l.LeaseValid() {
		return problem(http.StatusServiceUnavailable, "lease-lapsed",
			"this host's cluster lease is not renewed (NATS out of reach?): it calls no handler until it is, and rejoins by itself")
	}
	if err := s.deps.Disk.Check(); err != nil {
		return problem(http.StatusServiceUnavailable, "store-cannot-write", err.Error())
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
}

// storageProblem answers a write the space guard refused: 507 Insufficient
// Storage below the reserve, 503 when the data directory cannot be used.
// Nothing was written either way.
func storageProblem(e *diskspace.Error) *Problem {
	if e.Err != nil {
		return problem(http.StatusServiceUnavailable, "store-unavailable", e.Error()+"; nothing was written")
	}
	return problem(http.StatusInsufficientStorage, "insufficient-storage", e.Error()+"; nothing was written")
}

// leaseHolder is what readyz and the metrics read of a cluster beside
// ClusterView: whether its lease lets it act (*cluster.Cluster has it).
type leaseHolder interface {
	LeaseValid() bool
}
