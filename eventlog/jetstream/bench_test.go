package jetstream_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/internal/testing/natstest"
)

// benchPayload is the ~100-byte event of eventlog's BenchmarkAppend.
var benchPayload = []byte(`{"orderId":"o-123456","sku":"SKU-0001","quantity":3,"price":"19.99","currency":"EUR"}`)

// benchLog is one log a benchmark compares, opened by open.
type benchLog struct {
	name string
	open func(b *testing.B) eventlog.Log
}

// benchLogs opens the logs compared, in one run: Badger on disk (no fsync,
// its default), and JetStream on one in-process server (R1) and on an
// in-process three-node cluster (R3), file storage. The NATS servers run in
// the benchmark's process and share its cores.
func benchLogs(b *testing.B) []benchLog {
	return []benchLog{
		{"badger", func(b *testing.B) eventlog.Log {
			l, err := eventlog.Open(b.TempDir(), eventlog.Options{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { l.Close(context.Background()) })
			return l
		}},
		{"jetstream-R1", func(b *testing.B) eventlog.Log {
			return open(b, natstest.RunServer(b).URL(), optionsFor(b.Name(), 1))
		}},
		{"jetstream-R3", func(b *testing.B) eventlog.Log {
			return open(b, natstest.RunCluster(b, 3).URLs(), optionsFor(b.Name(), 3))
		}},
	}
}

// syncAlwaysLogs are benchLogs' JetStream logs on servers that fsync every
// write before acknowledging it (sync_interval: always); the others run with
// NATS's default, a sync every two minutes.
func syncAlwaysLogs() []benchLog {
	return []benchLog{
		{"jetstream-R1-syncalways", func(b *testing.B) eventlog.Log {
			return open(b, natstest.RunServerWith(b, natstest.SyncAlways).URL(), optionsFor(b.Name(), 1))
		}},
		{"jetstream-R3-syncalways", func(b *testing.B) eventlog.Log {
			return open(b, natstest.RunClusterWith(b, 3, natstest.SyncAlways).URLs(), optionsFor(b.Name(), 3))
		}},
	}
}

func benchAppend(l eventlog.Log, id string) error {
	_, err := l.Append(context.Background(), eventlog.AppendRequest{
		AggregateType: "order", AggregateID: id, ExpectedVersion: 0,
		Events: []eventlog.Event{{Type: "OrderPlaced", Payload: benchPayload}},
	})
	return err
}

// BenchmarkAppend appends one commit of one ~100-byte event per op, each to
// its own aggregate at ExpectedVersion 0: one appender after another
// (serial: the latency of one append), and 16 at once (parallel: what a
// host serving many requests gets). The JetStream logs run twice: on
// servers with NATS's default sync and on servers syncing every write.
func BenchmarkAppend(b *testing.B) {
	for _, lc := range append(benchLogs(b), syncAlwaysLogs()...) {
		b.Run(lc.name, func(b *testing.B) {
			l := lc.open(b)
			// The testing package runs a benchmark more than once (b.N = 1
			// first); each run appends to aggregates of its own.
			var runs atomic.Int64
			b.Run("serial", func(b *testing.B) {
				run := runs.Add(1)
				b.ReportAllocs()
				for i := range b.N {
					if err := benchAppend(l, fmt.Sprintf("s-%d-%d", run, i)); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
			})
			b.Run("parallel16", func(b *testing.B) {
				var n atomic.Int64
				run := runs.Add(1)
				b.SetParallelism(16)
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if err := benchAppend(l, fmt.Sprintf("p-%d-%d", run, n.Add(1))); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
			})
		})
	}
}

// BenchmarkRead reads a log of 20,000 commits in pages of 1000, as a
// subscription's reader does; one op is one commit read.
func BenchmarkRead(b *testing.B) {
	const size, page = 20000, 1000
	for _, lc := range benchLogs(b) {
		b.Run(lc.name, func(b *testing.B) {
			l := lc.open(b)
			var wg sync.WaitGroup
			var next atomic.Int64
			for range 16 {
				wg.Go(func() {
					for i := next.Add(1); i <= size; i = next.Add(1) {
						if err := benchAppend(l, fmt.Sprint(i)); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.ReportAllocs()
			b.ResetTimer()
			pos := uint64(1)
			for read := 0; read < b.N; {
				cs, err := l.Read(context.Background(), pos, min(page, b.N-read))
				if err != nil || len(cs) == 0 {
					b.Fatalf("read at %d: %d commits, %v", pos, len(cs), err)
				}
				read += len(cs)
				pos = cs[len(cs)-1].Position + 1
				if pos > size {
					pos = 1
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
		})
	}
}
