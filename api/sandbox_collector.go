package api

import (
	"github.com/berthhq/berth/sandbox"
	"github.com/prometheus/client_golang/prometheus"
)

// sandboxCollector reports every loaded module's instance pool at scrape
// time: how many instances exist, the memory the idle ones hold, why
// instances were closed, and what memory the module holds (its instances,
// its code, its machine code), beside the process's machine code. A module
// being replaced under the same name is counted with its successor.
type sandboxCollector struct {
	sb *sandbox.Sandbox

	instances, memory, maxMemory, limit, closed, compiled, held, machineCode *prometheus.Desc
}

func newSandboxCollector(sb *sandbox.Sandbox) *sandboxCollector {
	mod := []string{"module"}
	return &sandboxCollector{
		sb:        sb,
		instances: prometheus.NewDesc("berth_sandbox_instances", "Instances of the module, idle in its pool or busy serving a call.", []string{"module", "state"}, nil),
		memory:    prometheus.NewDesc("berth_sandbox_instance_memory_bytes", "Linear memory held by the module's idle instances, summed.", mod, nil),
		maxMemory: prometheus.NewDesc("berth_sandbox_instance_memory_max_bytes", "Linear memory of the module's largest idle instance.", mod, nil),
		limit:     prometheus.NewDesc("berth_sandbox_memory_limit_bytes", "The module's memory limit per instance.", mod, nil),
		closed:    prometheus.NewDesc("berth_sandbox_instances_closed_total", "Instances closed, by reason: failed (trap, timeout, memory exceeded), memory (grown to sandbox.recycle-memory-percent of the limit), idle (sandbox.idle-timeout), tier-up (an interpreter instance after the module's compiled code was ready).", []string{"module", "reason"}, nil),
		compiled:  prometheus.NewDesc("berth_sandbox_module_compiled", "1 when the module runs compiled code, 0 while it (or the version it replaces) runs on the interpreter (sandbox.tier-up).", mod, nil),
		held: prometheus.NewDesc("berth_sandbox_module_memory_bytes", "Memory the module holds, by part: instances (the linear memory of its live instances, idle or busy), code (its module as compiled, kept to compile again), machine-code (its compiled code, measured at its compile; 0 on the interpreter or when not known).",
			[]string{"module", "part"}, nil),
		machineCode: prometheus.NewDesc("berth_sandbox_machine_code_bytes", "Machine code the process holds: every compiled module's, mapped outside the Go heap.", nil, nil),
	}
}

// Describe sends the descriptors.
func (c *sandboxCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.instances, c.memory, c.maxMemory, c.limit, c.closed, c.compiled, c.held, c.machineCode} {
		ch <- d
	}
}

// Collect reads every module's pool.
func (c *sandboxCollector) Collect(ch chan<- prometheus.Metric) {
	byName := map[string]*sandbox.Stats{}
	compiled := map[string]bool{}
	var names []string
	for _, m := range c.sb.Modules() {
		st := m.Stats()
		c, seen := compiled[m.Name()]
		compiled[m.Name()] = (c || !seen) && m.Tier() == sandbox.TierCompiled
		sum, ok := byName[m.Name()]
		if !ok {
			byName[m.Name()] = &st
			names = append(names, m.Name())
			continue
		}
		sum.Live += st.Live
		sum.Idle += st.Idle
		sum.IdleMemoryBytes += st.IdleMemoryBytes
		sum.MaxIdleMemoryBytes = max(sum.MaxIdleMemoryBytes, st.MaxIdleMemoryBytes)
		sum.MemoryLimitBytes = max(sum.MemoryLimitBytes, st.MemoryLimitBytes)
		sum.ClosedFailed += st.ClosedFailed
		sum.ClosedMemory += st.ClosedMemory
		sum.ClosedIdle += st.ClosedIdle
		sum.ClosedTierUp += st.ClosedTierUp
		sum.InstanceMemoryBytes += st.InstanceMemoryBytes
		sum.CodeBytes += st.CodeBytes
		sum.MachineCodeBytes += st.MachineCodeBytes
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, name := range names {
		st := byName[name]
		gauge(c.instances, float64(st.Idle), name, "idle")
		gauge(c.instances, float64(max(st.Live-int64(st.Idle), 0)), name, "busy")
		gauge(c.memory, float64(st.IdleMemoryBytes), name)
		gauge(c.maxMemory, float64(st.MaxIdleMemoryBytes), name)
		gauge(c.limit, float64(st.MemoryLimitBytes), name)
		gauge(c.compiled, b2f(compiled[name]), name)
		gauge(c.held, float64(st.InstanceMemoryBytes), name, "instances")
		gauge(c.held, float64(st.CodeBytes), name, "code")
		gauge(c.held, float64(st.MachineCodeBytes), name, "machine-code")
		for _, r := range []struct {
			reason string
			n      int64
		}{{"failed", st.ClosedFailed}, {"memory", st.ClosedMemory}, {"idle", st.ClosedIdle}, {"tier-up", st.ClosedTierUp}} {
			ch <- prometheus.MustNewConstMetric(c.closed, prometheus.CounterValue, float64(r.n), name, r.reason)
		}
	}
	gauge(c.machineCode, float64(sandbox.MachineCodeBytes()))
}

// b2f is 1 for true, 0 for false.
func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
