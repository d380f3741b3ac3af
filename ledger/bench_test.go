package ledger_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/ledger/ledgertest"
)

func openBench(b *testing.B) *ledger.Badger {
	s, err := ledger.Open(b.TempDir(), ledger.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

// BenchmarkCheckpointWrite is one SetCheckpoint per Update, on disk with
// default options (no fsync).
func BenchmarkCheckpointWrite(b *testing.B) {
	s := openBench(b)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if err := s.Update(ctx, func(tx ledger.Tx) error { return tx.SetCheckpoint("orders.projection", uint64(i)) }); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPark parks one new aggregate per op: PutParked (with a
// one-entry history) + Notify + SetCheckpoint in one Update.
func BenchmarkPark(b *testing.B) { benchPark(b, 0) }

// BenchmarkParkInAGroup is BenchmarkPark as an incident parks: each
// record fails a millisecond after the one before, so its group's last
// failure moves with every park.
//
//	go test ./ledger -run '^$' -bench 'BenchmarkPark(InAGroup)?$' -benchmem
func BenchmarkParkInAGroup(b *testing.B) { benchPark(b, time.Millisecond) }

// benchPark parks one new aggregate per op, record i failing at
// now + i*step.
func benchPark(b *testing.B, step time.Duration) {
	s := openBench(b)
	ctx := context.Background()
	now := time.Now().UTC()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if err := parkOne(ctx, s, i, now.Add(time.Duration(i)*step)); err != nil {
			b.Fatal(err)
		}
	}
}

// parkOne parks aggregate o-i, failed at at, in one Update.
func parkOne(ctx context.Context, s ledger.Store, i int, at time.Time) error {
	return s.Update(ctx, ledgertest.ParkTx(i, at))
}

// BenchmarkUpdateConcurrent writes one checkpoint per Update (each client
// its own subscription's) from 1 and 16 clients at once, without fsync and
// with SyncWrites (store.sync "always", the host's default). Badger commits
// concurrent Updates in one batch but syncs its write-ahead log once per
// Update in it, so the synced figure is about one fsync per Update.
//
//	go test ./ledger -run '^$' -bench BenchmarkUpdateConcurrent -benchtime 4000x
func BenchmarkUpdateConcurrent(b *testing.B) {
	for _, synced := range []bool{false, true} {
		for _, clients := range []int{1, 16} {
			b.Run(fmt.Sprintf("sync=%v/clients=%d", synced, clients), func(b *testing.B) {
				s, err := ledger.Open(b.TempDir(), ledger.Options{SyncWrites: synced})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close(context.Background())
				ctx := context.Background()
				var next atomic.Int64
				var wg sync.WaitGroup
				b.ResetTimer()
				start := time.Now()
				for c := range clients {
					wg.Go(func() {
						sub := fmt.Sprintf("sub-%d", c)
						for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
							if err := s.Update(ctx, func(tx ledger.Tx) error { return tx.SetCheckpoint(sub, uint64(i)) }); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "updates/s")
			})
		}
	}
}

// BenchmarkScale is ledgertest.BenchmarkScale on Badger: the parked reads
// and a park at 10,000 and 100,000 parked (BERTH_SCALE for others).
func BenchmarkScale(b *testing.B) {
	ledgertest.BenchmarkScale(b, func(b *testing.B) ledger.Store { return openBench(b) }, 1000)
}
