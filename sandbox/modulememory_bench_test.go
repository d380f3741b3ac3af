package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	goruntime "runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/clock"
	"github.com/berthhq/berth/internal/testing/testbuild"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// goSamples are the repository's Go guests: what issue 32 deployed, one
// after another, to see what a module costs the host.
var goSamples = []string{
	"samples/shipment-notifier", "samples/order-summary", "samples/order-saga",
	"samples/bench", "samples/class-tree", "samples/misbehaving",
}

// goSampleBytes builds the Go samples once per test binary.
var goSampleBytes = sync.OnceValues(func() ([][]byte, error) {
	out := make([][]byte, len(goSamples))
	for i, pkg := range goSamples {
		b, err := testbuild.Bytes(pkg)
		if err != nil {
			return nil, err
		}
		out[i] = b
	}
	return out, nil
})

// memChildEnv selects, in a re-run of the test binary, the one way of
// holding modules that TestModuleMemoryChild measures.
const memChildEnv = "BERTH_MODULE_MEMORY_CHILD"

// memFigures is what a child measured, in bytes per process: before any
// module (Base), with every module deployed and its background work done
// (Deployed), once the idle timeout has passed (Idle), at the end of a
// burst of calls (Burst), and once the idle timeout has passed after it
// (After). RSS is the process's resident set as the runtime left it;
// Released the same after debug.FreeOSMemory (the floor); Heap the live Go
// heap after a collection.
type memFigures struct {
	Modules                                           int
	BaseRSS, BaseHeap                                 uint64
	DeployedRSS, DeployedReleased, DeployedHeap       uint64
	IdleRSS, IdleReleased, IdleHeap                   uint64
	BurstRSS, BurstHeap                               uint64
	AfterRSS, AfterReleased, AfterHeap                uint64
	LoadSeconds                                       []float64 // each module's load, one after another
	InstancesDeployed, InstancesBurst, InstancesAfter int64     // live instances, all modules
	// What the modules' Stats say they hold, summed, once deployed; and the
	// process's machine code.
	StatsMachineCode, StatsCode, StatsInstances, ProcessMachineCode uint64
}

// BenchmarkModuleMemory measures what a deployed Go module costs the
// process beside what plain wazero keeps for the same module, in one run
// (issue 32). Each way runs in a process of its own (a re-run of this test
// binary), which deploys the six Go samples one after another (or
// BERTH_MODULES modules, cycling through them, each a build of its own),
// waits for every background compile, and reports per module:
//
//   - MiB-rss/module: resident memory once deployed and idle, as the
//     runtime left it, over the process before the first module;
//   - MiB-released/module: the same after debug.FreeOSMemory (the floor);
//   - MiB-heap/module: the live Go heap after a collection;
//   - x-wazero: MiB-rss/module over plain wazero's compiled module's
//     MiB-released/module (wazero's best case);
//   - idle-x-wazero: the same once the idle timeout has passed (the
//     sandbox's instances closed).
//
// The sandbox's ways then have a burst of calls (16 goroutines on each
// module, filling its pool) and the idle timeout after it: after/idle is
// the RSS then over the idle RSS before the burst; load-max/first is the
// slowest load after the first over the first.
//
//	go test ./sandbox -run '^$' -bench BenchmarkModuleMemory -benchtime 1x
//	BERTH_MODULES=20 go test ./sandbox -run '^$' -bench 'BenchmarkModuleMemory/sandbox' -benchtime 1x
func BenchmarkModuleMemory(b *testing.B) {
	var wazero float64 // plain wazero's compiled module, MiB released per module
	for _, mode := range []string{"wazero-compiler", "wazero-interpreter", "sandbox-tierup", "sandbox-compiled"} {
		b.Run(mode, func(b *testing.B) {
			var f memFigures
			for b.Loop() {
				f = runMemChild(b, mode, memModules())
			}
			per := func(after, before uint64) float64 {
				return (float64(after) - float64(before)) / float64(f.Modules) / (1 << 20)
			}
			b.ReportMetric(per(f.DeployedRSS, f.BaseRSS), "MiB-rss/module")
			b.ReportMetric(per(f.DeployedReleased, f.BaseRSS), "MiB-released/module")
			b.ReportMetric(per(f.DeployedHeap, f.BaseHeap), "MiB-heap/module")
			b.ReportMetric(float64(f.DeployedRSS)/(1<<20), "MiB-rss-total")
			if mode == "wazero-compiler" {
				wazero = per(f.DeployedReleased, f.BaseRSS)
			} else if wazero > 0 {
				b.ReportMetric(per(f.DeployedRSS, f.BaseRSS)/wazero, "x-wazero")
			}
			if strings.HasPrefix(mode, "sandbox") {
				if wazero > 0 {
					b.ReportMetric(per(f.IdleRSS, f.BaseRSS)/wazero, "idle-x-wazero")
				}
				b.ReportMetric(float64(f.IdleRSS)/(1<<20), "MiB-idle-total")
				b.ReportMetric(float64(f.BurstRSS)/(1<<20), "MiB-burst-total")
				b.ReportMetric(float64(f.AfterRSS)/float64(f.IdleRSS), "after/idle")
				b.ReportMetric(slowestOverFirst(f.LoadSeconds), "load-max/first")
			}
			b.Logf("%s: %+v", mode, f)
		})
	}
}

// memModules is how many modules each child deploys: BERTH_MODULES, or
// the six Go samples once.
func memModules() int {
	if n, err := strconv.Atoi(os.Getenv("BERTH_MODULES")); err == nil && n > 0 {
		return n
	}
	return len(goSamples)
}

func slowestOverFirst(s []float64) float64 {
	if len(s) == 0 || s[0] == 0 {
		return 0
	}
	worst := 0.0
	for _, v := range s[1:] {
		worst = max(worst, v)
	}
	return worst / s[0]
}

// runMemChild runs TestModuleMemoryChild in a process of its own and
// returns what it measured.
func runMemChild(tb testing.TB, mode string, n int) memFigures {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestModuleMemoryChild$", "-test.v")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%d", memChildEnv, mode, n))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("%s: %v\n%s\n%s", mode, err, out, stderr.Bytes())
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), "memfigures "); ok {
			var f memFigures
			if err := json.Unmarshal([]byte(line), &f); err != nil {
				tb.Fatal(err)
			}
			return f
		}
	}
	tb.Fatalf("%s: no figures in\n%s", mode, out)
	return memFigures{}
}

// TestModuleMemoryChild is BenchmarkModuleMemory's child; it does nothing
// unless the benchmark ran it.
func TestModuleMemoryChild(t *testing.T) {
	spec := os.Getenv(memChildEnv)
	if spec == "" {
		return // not a child: nothing to measure
	}
	mode, ns, _ := strings.Cut(spec, ",")
	n, err := strconv.Atoi(ns)
	if err != nil {
		t.Fatal(err)
	}
	wasms, err := goSampleBytes()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var f memFigures
	f.Modules = n
	f.BaseRSS, _, f.BaseHeap = measureMem()
	var sb *Sandbox
	var ms []*Module
	instances := func() (n int64) {
		for _, m := range ms {
			n += m.liveInstances()
		}
		return n
	}
	switch mode {
	case "wazero-compiler", "wazero-interpreter":
		rc := wazero.NewRuntimeConfigCompiler()
		if mode == "wazero-interpreter" {
			rc = wazero.NewRuntimeConfigInterpreter()
		}
		r := wazero.NewRuntimeWithConfig(ctx, rc.WithMemoryLimitPages(DefaultMemoryLimitPages))
		defer r.Close(ctx)
		wasi_snapshot_preview1.MustInstantiate(ctx, r)
		var cms []wazero.CompiledModule
		for i := range n {
			start := time.Now()
			// Each a build of its own: wazero shares the compile of equal bytes.
			cm, err := r.CompileModule(ctx, testbuild.Rebuilt(wasms[i%len(wasms)], strconv.Itoa(i)))
			if err != nil {
				t.Fatal(err)
			}
			f.LoadSeconds = append(f.LoadSeconds, time.Since(start).Seconds())
			cms = append(cms, cm)
		}
		defer goruntime.KeepAlive(cms)
	case "sandbox-tierup", "sandbox-compiled":
		clk := clock.NewFake(time.Now())
		cfg := Config{CacheDir: t.TempDir(), Tiering: TierUp, Clock: clk, Logger: slog.New(slog.DiscardHandler)}
		if mode == "sandbox-compiled" {
			cfg.Tiering = CompiledOnly
		}
		var err error
		if sb, err = New(cfg); err != nil {
			t.Fatal(err)
		}
		defer sb.Close(ctx)
		for i := range n {
			// Each a build of its own, as n deployed modules would be.
			wasm := testbuild.Rebuilt(wasms[i%len(wasms)], strconv.Itoa(i))
			start := time.Now()
			m, err := sb.Load(ctx, fmt.Sprintf("m%d", i), wasm, ModuleConfig{})
			if err != nil {
				t.Fatal(err)
			}
			f.LoadSeconds = append(f.LoadSeconds, time.Since(start).Seconds())
			ms = append(ms, m)
		}
		for _, m := range ms {
			if m.tierDone != nil {
				<-m.tierDone
			}
			if m.Tier() != TierCompiled {
				t.Fatalf("%s on %s", m.Name(), m.Tier())
			}
		}
		f.InstancesDeployed = instances()
		for _, m := range ms {
			st := m.Stats()
			f.StatsMachineCode += st.MachineCodeBytes
			f.StatsCode += st.CodeBytes
			f.StatsInstances += st.InstanceMemoryBytes
		}
		// The idle timeout passes: what the janitor does, at once.
		idle := func() {
			clk.Advance(DefaultIdleTimeout + time.Second)
			sb.releaseIdle()
		}
		defer func() {
			idle()
			settle()
			f.IdleRSS, f.IdleReleased, f.IdleHeap = measureMem()
			var wg sync.WaitGroup
			for _, m := range ms {
				for range 2 * DefaultMaxInstances {
					wg.Go(func() {
						for range 5 {
							engineCall(m, noopEvent())
						}
					})
				}
			}
			wg.Wait()
			f.InstancesBurst = instances()
			f.BurstRSS, _, f.BurstHeap = measureMem()
			idle()
			settle()
			f.InstancesAfter = instances()
			f.AfterRSS, f.AfterReleased, f.AfterHeap = measureMem()
			b, _ := json.Marshal(f)
			fmt.Printf("memfigures %s\n", b)
		}()
	default:
		t.Fatalf("unknown mode %q", mode)
	}
	settle()
	f.ProcessMachineCode = MachineCodeBytes()
	f.DeployedRSS, f.DeployedReleased, f.DeployedHeap = measureMem()
	if p := os.Getenv("BERTH_HEAP_PROFILE"); p != "" {
		writeHeapProfile(t, p+"."+mode)
	}
	if sb == nil {
		b, _ := json.Marshal(f)
		fmt.Printf("memfigures %s\n", b)
	}
}

// settle waits for what follows a release: the sandbox's return of memory
// to the OS comes within freeInterval.
func settle() { time.Sleep(freeInterval + 500*time.Millisecond) }

// measureMem returns the process's resident set as the runtime left it,
// the same after debug.FreeOSMemory, and the live heap.
func measureMem() (rss, released, heap uint64) {
	rss = readRSS()
	debug.FreeOSMemory()
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	return rss, readRSS(), ms.HeapAlloc
}

// readRSS is VmRSS from /proc/self/status (0 where there is none).
func readRSS() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func writeHeapProfile(t *testing.T, path string) {
	fh, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if err := pprof.Lookup("heap").WriteTo(fh, 0); err != nil {
		t.Fatal(err)
	}
}
