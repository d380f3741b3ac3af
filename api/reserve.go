package api

import "github.com/labstack/echo/v4"

// storeUse is what a route does to the data directory, as the route table
// says. It decides which routes are refused while the free space is below
// the reserve (store.min-free): every state-changing one (see changesState)
// unless it is marked storesNothing. So a route added to the table is
// guarded without anyone remembering to, and only a deliberate mark lets a
// write through.
type storeUse int

const (
	// reads: a safe route (GET); it reads the stores or nothing.
	reads storeUse = iota
	// writes: a route that stores something (the event log, the ledger, the
	// module directory); refused below the reserve.
	writes
	// storesNothing: a state-changing route that writes nothing to the data
	// directory, served below the reserve. Reloading the configuration is
	// one, and must be: lowering store.min-free is how an operator lets
	// writes through again.
	storesNothing
	// appends: a route that writes the event log alone, refused below the
	// reserve like writes, and not written to the audit log: the log keeps
	// every commit itself (its position and time), and an audit entry per
	// append would double the ledger's writes — on JetStream three replicas
	// of a transaction for each event — and grow the ledger with the log
	// (docs/BENCHMARKS.md, BenchmarkAppendREST).
	appends
)

// audited reports whether a call of r that succeeded is written to the
// audit log: every state-changing route but the event log's appends.
func (r route) audited() bool { return changesState(r.method) && r.store != appends }

// guarded reports whether r is refused while the data directory is below
// its free-space reserve.
func (r route) guarded() bool { return changesState(r.method) && r.store != storesNothing }

// guardDisk refuses a write while the data directory's free space is below
// the reserve (507) or the directory is unusable (503), before the handler
// runs, so that nothing of it is done. The stores ask the same guard before
// each write they make; asking here as well covers writes that no store's
// check sees (a module's files removed on DELETE) and answers them all the
// same way, before any body is read.
func (s *Server) guardDisk(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := s.deps.Disk.Check(); err != nil {
			return err // a *diskspace.Error: errorHandler makes it the 507 (or 503) of storageProblem
		}
		return next(c)
	}
}
