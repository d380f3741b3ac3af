package subscription

import (
	"context"
	"fmt"
	"runtime/pprof"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/internal/clock"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/retry"
)

// BenchmarkDeliver measures events per second through one subscription on
// the embedded log with a native Go handler: healthy, and with a poisoned
// aggregate present (parked at its first event, its later events held). The
// ratio poisoned/healthy should stay above 0.95. Besides events/s it reports
// the process's CPU time per event (user + system, every goroutine: the
// reader, the workers, Badger's), which is what the engine costs beside the
// handler, and the allocations per event (ns/op and allocs/op count the
// whole delivery of b.N events as one op each).
//
//	go test -run '^$' -bench BenchmarkDeliver -benchtime 20000x ./subscription/
func BenchmarkDeliver(b *testing.B) {
	for _, poisoned := range []bool{false, true} {
		name := "healthy"
		if poisoned {
			name = "poisoned"
		}
		b.Run(name, func(b *testing.B) { benchDeliver(b, poisoned) })
	}
}

func benchDeliver(b *testing.B, poisoned bool) {
	dir := b.TempDir()
	log, err := eventlog.Open(dir+"/log", eventlog.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer log.Close(context.Background())
	store, err := ledger.Open(dir+"/ledger", ledger.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close(context.Background())
	ctx := context.Background()
	const aggregates = 256
	// The poisoned aggregate gets one event in 64: far more than a real
	// poison pill, so that holding its events is part of what is measured.
	var handled atomic.Int64
	inv := InvokerFunc(func(ctx context.Context, d Delivery) *retry.Failure {
		if d.Commit.AggregateID == "poison" {
			return &retry.Failure{Classes: []string{"Bug"}, Message: "poisoned"}
		}
		handled.Add(1)
		return nil
	})
	s := Spec{Processor: "Bench", Handler: "on", Start: StartBeginning, Invoker: inv,
		HandlerRetry: retry.Settings{Unrecoverable: []string{"Bug"}}}
	want := int64(0)
	var batch []eventlog.AppendRequest
	for i := range b.N {
		id := fmt.Sprint("o", i%aggregates)
		if poisoned && i%64 == 0 {
			id = "poison"
		} else {
			want++
		}
		batch = append(batch, eventlog.AppendRequest{AggregateType: "Order", AggregateID: id,
			ExpectedVersion: eventlog.AnyVersion, Events: []eventlog.Event{{Type: "OrderShipped", Payload: []byte(`{"n":1}`)}}})
	}
	for _, req := range batch {
		if _, err := log.Append(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
	eng, err := Open(log, store, Options{}, s)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	cpu0 := cpuTime(b)
	// The engine's goroutines inherit the label, so that a CPU profile can
	// be narrowed to delivery (-tagfocus phase=deliver), leaving out the
	// appends above and Badger's own goroutines.
	pprof.SetGoroutineLabels(pprof.WithLabels(ctx, pprof.Labels("phase", "deliver")))
	err = eng.Start(ctx)
	pprof.SetGoroutineLabels(ctx)
	if err != nil {
		b.Fatal(err)
	}
	for handled.Load() < want {
		time.Sleep(100 * time.Microsecond)
	}
	// Wait for the checkpoint too: everything is finished, held events included.
	for {
		st, err := eng.Status(ctx, "Bench.on")
		if err != nil {
			b.Fatal(err)
		}
		if st.Checkpoint == uint64(b.N)+1 {
			break
		}
		time.Sleep(100 * time.Microsecond)
	}
	elapsed := time.Since(start)
	cpu := cpuTime(b) - cpu0
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(b.N), "cpu-µs/event")
	if err := eng.Close(ctx); err != nil {
		b.Fatal(err)
	}
}

// cpuTime is the CPU time the process has used so far, user and system.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkAttemptDeadline measures an attempt's deadline alone: made, read
// the way a no-op call reads it (Deadline, then Err after the call), and
// ended. WithTimeoutCause is how the engine made it before attemptCtx;
// parallel runs one goroutine per core under the same run context, as the
// workers of a subscription do.
//
//	go test -run '^$' -bench BenchmarkAttemptDeadline -count 6 ./subscription/
func BenchmarkAttemptDeadline(b *testing.B) {
	kinds := []struct {
		name    string
		attempt func(run context.Context) bool
	}{
		{"WithTimeoutCause", func(run context.Context) bool {
			ctx, cancel := context.WithTimeoutCause(run, time.Minute, ErrAttemptTimeout)
			ctx.Deadline()
			timedOut := run.Err() == nil && context.Cause(ctx) == ErrAttemptTimeout
			cancel()
			return timedOut
		}},
		{"attemptCtx", func(run context.Context) bool {
			ctx := newAttemptCtx(run, clock.Real(), time.Minute)
			ctx.Deadline()
			timedOut := ctx.timedOut()
			ctx.end()
			return timedOut
		}},
	}
	for _, k := range kinds {
		run, cancel := context.WithCancel(context.Background())
		b.Run(k.name+"/serial", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if k.attempt(run) {
					b.Fatal("timed out")
				}
			}
		})
		b.Run(k.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if k.attempt(run) {
						b.Error("timed out")
						return
					}
				}
			})
		})
		cancel()
	}
}
