package ledger_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berthhq/berth/ledger"
)

// BenchmarkParkConcurrent parks one new aggregate per op (parkOne: the
// record, its indexes, counters and group, a notification and a
// checkpoint) from 64 clients at once, fsync on (store.sync "always"):
// the ledger's writer is the bound, as in a park storm or a bulk resume.
// parks/s is over the whole run.
//
//	go test ./ledger -run '^$' -bench BenchmarkParkConcurrent -benchtime 20000x
func BenchmarkParkConcurrent(b *testing.B) {
	s, err := ledger.Open(b.TempDir(), ledger.Options{SyncWrites: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close(context.Background())
	ctx := context.Background()
	now := time.Now().UTC()
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for range 64 {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
				if err := parkOne(ctx, s, int(i), now.Add(time.Duration(i)*time.Millisecond)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "parks/s")
}
