package api

import (
	"context"
	"fmt"
	"log/slog"
	goruntime "runtime"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/internal/testing/testbuild"
	"github.com/berthhq/berth/sandbox"
	"github.com/berthhq/berth/wasm/abi"
	"github.com/prometheus/client_golang/prometheus"
)

var misbehavingWasm = sync.OnceValues(func() ([]byte, error) { return testbuild.Bytes("samples/misbehaving") })

// gathered returns the value of metric name with the given labels.
func gathered(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if want, ok := labels[l.GetName()]; ok && want != l.GetValue() {
					continue metrics
				}
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue(), true
			}
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// TestSandboxMetrics: the pool's instances, their memory and the reasons
// instances were closed, as /metrics reports them, after a call that
// succeeds, one that grows past the recycle size, and one that hits the
// memory limit.
func TestSandboxMetrics(t *testing.T) {
	t.Parallel()
	wasm, err := misbehavingWasm()
	if err != nil {
		t.Fatal(err)
	}
	sb, err := sandbox.New(sandbox.Config{CacheDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close(context.Background()) })
	ctx := context.Background()
	m, err := sb.Load(ctx, "misbehaving", wasm, sandbox.ModuleConfig{MemoryLimitPages: 512})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(newSandboxCollector(sb))
	mod := map[string]string{"module": "misbehaving"}
	value := func(name string, extra ...string) float64 {
		labels := map[string]string{"module": "misbehaving"}
		for i := 0; i+1 < len(extra); i += 2 {
			labels[extra[i]] = extra[i+1]
		}
		v, ok := gathered(t, reg, name, labels)
		if !ok {
			t.Fatalf("no %s%v", name, labels)
		}
		return v
	}
	for _, step := range []struct {
		handler, payload                       string
		kind                                   sandbox.OutcomeKind
		idle                                   float64
		closedFailed, closedMemory, closedIdle float64
	}{
		{"echo", "", sandbox.Success, 1, 0, 0, 0},
		{"memoryGrower", `{"mib": 20}`, sandbox.Success, 0, 0, 1, 0}, // 20 of 32 MiB: over half
		{"memoryHog", "", sandbox.MemoryExceeded, 0, 1, 1, 0},
	} {
		o := m.Invoke(ctx, &abi.Event{Handler: step.handler, InvocationKey: "k", Payload: []byte(step.payload)}, 10*time.Second)
		if o.Kind != step.kind {
			t.Fatalf("%s: %v %s", step.handler, o.Kind, o.Error())
		}
		if got := value("berth_sandbox_instances", "state", "idle"); got != step.idle {
			t.Errorf("after %s: %v idle instances, want %v", step.handler, got, step.idle)
		}
		if got := value("berth_sandbox_instances", "state", "busy"); got != 0 {
			t.Errorf("after %s: %v busy instances, want 0", step.handler, got)
		}
		if got := value("berth_sandbox_instance_memory_max_bytes"); got >= 16<<20 {
			t.Errorf("after %s: an idle instance holds %v bytes, half the limit or more", step.handler, got)
		}
		if step.idle > 0 && value("berth_sandbox_instance_memory_bytes") <= 0 {
			t.Errorf("after %s: idle instances hold no memory", step.handler)
		}
		// No call in flight: the module's instances are its idle ones.
		if got, idle := value("berth_sandbox_module_memory_bytes", "part", "instances"), value("berth_sandbox_instance_memory_bytes"); got != idle {
			t.Errorf("after %s: the module's instances hold %v bytes, its idle ones %v", step.handler, got, idle)
		}
		for reason, want := range map[string]float64{"failed": step.closedFailed, "memory": step.closedMemory, "idle": step.closedIdle} {
			if got := value("berth_sandbox_instances_closed_total", "reason", reason); got != want {
				t.Errorf("after %s: %v instances closed for %s, want %v", step.handler, got, reason, want)
			}
		}
	}
	if got := value("berth_sandbox_module_compiled"); got != 1 {
		t.Errorf("berth_sandbox_module_compiled %v, want 1 (compiled before Load returns by default)", got)
	}
	if got := value("berth_sandbox_instances_closed_total", "reason", "tier-up"); got != 0 {
		t.Errorf("%v instances closed for tier-up, want 0", got)
	}
	if got := value("berth_sandbox_memory_limit_bytes"); got != 32<<20 {
		t.Errorf("memory limit %v, want 32 MiB", got)
	}
	if got := value("berth_sandbox_module_memory_bytes", "part", "code"); got <= 0 {
		t.Errorf("the module's code: %v bytes, want its size", got)
	}
	if code, ok := gathered(t, reg, "berth_sandbox_machine_code_bytes", nil); !ok || (goruntime.GOOS == "linux" && code <= 0) {
		t.Errorf("berth_sandbox_machine_code_bytes %v (reported %v), want the compiled module's code", code, ok)
	}
	m.Close(ctx)
	if _, ok := gathered(t, reg, "berth_sandbox_instances", mod); ok {
		t.Error("a closed module is still reported")
	}
}

// TestSandboxMetricsTier: under sandbox.tier-up a module missing from the
// compilation cache reports berth_sandbox_module_compiled 0 while it runs on
// the interpreter and 1 once its compiled code is ready, and never 1 before.
func TestSandboxMetricsTier(t *testing.T) {
	t.Parallel()
	wasm, err := misbehavingWasm()
	if err != nil {
		t.Fatal(err)
	}
	sb, err := sandbox.New(sandbox.Config{CacheDir: t.TempDir(), Tiering: sandbox.TierUp, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close(context.Background()) })
	m, err := sb.Load(context.Background(), "misbehaving", wasm, sandbox.ModuleConfig{})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(newSandboxCollector(sb))
	compiled := func() float64 {
		v, ok := gathered(t, reg, "berth_sandbox_module_compiled", map[string]string{"module": "misbehaving"})
		if !ok {
			t.Fatal("no berth_sandbox_module_compiled")
		}
		return v
	}
	// A module only moves from the interpreter to compiled code, so a 1
	// read before the tier means the tier is compiled already.
	if g := compiled(); g == 1 && m.Tier() != sandbox.TierCompiled {
		t.Fatalf("berth_sandbox_module_compiled 1 while the module is on %s", m.Tier())
	}
	checkfor.Nil(t, 2*time.Minute, 20*time.Millisecond, func() error {
		if tier := m.Tier(); tier != sandbox.TierCompiled {
			return fmt.Errorf("the module at tier %v, waiting for its compiled code", tier)
		}
		return nil
	})
	if g := compiled(); g != 1 {
		t.Fatalf("berth_sandbox_module_compiled %v once the module runs compiled, want 1", g)
	}
}
