package eventlog_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berthhq/berth/eventlog"
)

// BenchmarkAppend appends one commit of one ~100-byte event per op, each to
// its own aggregate at ExpectedVersion 0, on disk with Badger's default
// sizes, from 1, 16 and 64 clients at once: without fsync and with
// SyncWrites (store.sync "always", the host's default), where concurrent
// appends share Badger's batch and its one fsync. It reports appends/s and
// each append's mean latency (µs/append); ns/op is wall time over all
// clients.
//
//	go test ./eventlog -run '^$' -bench BenchmarkAppend -benchtime 4000x
func BenchmarkAppend(b *testing.B) {
	payload := []byte(`{"orderId":"o-123456","sku":"SKU-0001","quantity":3,"price":"19.99","currency":"EUR"}`)
	for _, synced := range []bool{false, true} {
		for _, clients := range []int{1, 16, 64} {
			b.Run(fmt.Sprintf("sync=%v/clients=%d", synced, clients), func(b *testing.B) {
				ctx := context.Background()
				l, err := eventlog.Open(b.TempDir(), eventlog.Options{SyncWrites: synced})
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close(ctx)
				var next, latency atomic.Int64
				var failed atomic.Pointer[error]
				var wg sync.WaitGroup
				b.ReportAllocs()
				b.ResetTimer()
				start := time.Now()
				for range clients {
					wg.Go(func() {
						for i := next.Add(1) - 1; i < int64(b.N); i = next.Add(1) - 1 {
							t0 := time.Now()
							_, err := l.Append(ctx, eventlog.AppendRequest{
								AggregateType: "order", AggregateID: fmt.Sprintf("o-%d", i), ExpectedVersion: 0,
								Events: []eventlog.Event{{Type: "OrderPlaced", Payload: payload}},
							})
							if err != nil {
								failed.Store(&err)
								return
							}
							latency.Add(int64(time.Since(t0)))
						}
					})
				}
				wg.Wait()
				elapsed := time.Since(start)
				b.StopTimer()
				if err := failed.Load(); err != nil {
					b.Fatal(*err)
				}
				b.ReportMetric(float64(b.N)/elapsed.Seconds(), "appends/s")
				b.ReportMetric(float64(latency.Load())/float64(b.N)/1e3, "µs/append")
			})
		}
	}
}

// BenchmarkAppendMany is BenchmarkAppend for batches: each client calls
// AppendMany with batch commits (one ~100-byte event each, to its own
// aggregate) at a time, without fsync and with SyncWrites, so that one run
// gives what the log alone (no API) makes of a batch's shared fsyncs. One
// op is one append; appends/s is over the wall time.
//
//	go test ./eventlog -run '^$' -bench BenchmarkAppendMany -benchtime 100000x
func BenchmarkAppendMany(b *testing.B) {
	payload := []byte(`{"orderId":"o-123456","sku":"SKU-0001","quantity":3,"price":"19.99","currency":"EUR"}`)
	for _, synced := range []bool{false, true} {
		for _, c := range []struct{ clients, batch int }{{1, 1000}, {16, 100}} {
			b.Run(fmt.Sprintf("sync=%v/clients=%d/batch=%d", synced, c.clients, c.batch), func(b *testing.B) {
				ctx := context.Background()
				l, err := eventlog.Open(b.TempDir(), eventlog.Options{SyncWrites: synced})
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close(ctx)
				var next atomic.Int64
				var failed atomic.Pointer[error]
				var wg sync.WaitGroup
				b.ResetTimer()
				start := time.Now()
				for range c.clients {
					wg.Go(func() {
						reqs := make([]eventlog.AppendRequest, 0, c.batch)
						for {
							first := next.Add(int64(c.batch)) - int64(c.batch)
							if first >= int64(b.N) || failed.Load() != nil {
								return
							}
							reqs = reqs[:0]
							for i := first; i < min(first+int64(c.batch), int64(b.N)); i++ {
								reqs = append(reqs, eventlog.AppendRequest{AggregateType: "order", AggregateID: fmt.Sprintf("o-%d", i),
									Events: []eventlog.Event{{Type: "OrderPlaced", Payload: payload}}})
							}
							for _, o := range l.AppendMany(ctx, reqs) {
								if o.Err != nil {
									failed.Store(&o.Err)
									return
								}
							}
						}
					})
				}
				wg.Wait()
				elapsed := time.Since(start)
				b.StopTimer()
				if err := failed.Load(); err != nil {
					b.Fatal(*err)
				}
				b.ReportMetric(float64(b.N)/elapsed.Seconds(), "appends/s")
			})
		}
	}
}

// BenchmarkRead reads a log of 20,000 commits (one ~100-byte event each,
// over 256 aggregates, as the subscription benchmark appends them) in
// batches of eventlog.DefaultReadLimit, as a subscription's reader does; one
// op is one commit read.
func BenchmarkRead(b *testing.B) {
	const commits, aggregates = 20000, 256
	ctx := context.Background()
	l, err := eventlog.Open(b.TempDir(), eventlog.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close(ctx)
	payload := []byte(`{"orderId":"o-123456","sku":"SKU-0001","quantity":3,"price":"19.99","currency":"EUR"}`)
	for i := range commits {
		if _, err := l.Append(ctx, eventlog.AppendRequest{
			AggregateType: "Order", AggregateID: fmt.Sprintf("o-%d", i%aggregates), ExpectedVersion: eventlog.AnyVersion,
			OwnerID: "buyer-7", Events: []eventlog.Event{{Type: "OrderPlaced", Payload: payload}},
		}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	from := uint64(1)
	for n := 0; n < b.N; {
		cs, err := l.Read(ctx, from, 0)
		if err != nil {
			b.Fatal(err)
		}
		n += len(cs)
		if from = cs[len(cs)-1].Position + 1; from > commits {
			from = 1
		}
	}
}
