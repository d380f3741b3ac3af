package api

import (
	"github.com/berthhq/berth/assembly"
)

// DepsOf returns the API's dependencies on the parts of the assembled host
// h: its configuration, stores, engine, operator, registry, jobs, sandbox,
// disk guard and place in the cluster. It is the one place they are taken
// from a host, for the binary and for every test that serves a whole host;
// the caller adds what is its own (Reload, Ready, Logger, Metrics).
func DepsOf(h *assembly.Host) Deps {
	d := Deps{Config: h.Config, Modules: h.Modules, Log: h.Events, Engine: h.Engine, Operator: h.Operator,
		Ledger: h.Ledger, Sandbox: h.Sandbox, Disk: h.Disk, Jobs: h.Jobs, Hooks: h.Hooks}
	if h.Cluster != nil {
		d.Cluster = h.Cluster
	}
	return d
}
