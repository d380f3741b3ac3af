package subscription

import (
	"context"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/clock"
)

// BenchmarkLeaseCheck is what the lease fence adds to every handler call
// (run.invokeAt, which is given the clock reading the attempt takes
// anyway): on a single host no lease is set; in a cluster it is.
func BenchmarkLeaseCheck(b *testing.B) {
	for _, bc := range []struct {
		name  string
		lease bool
	}{{"single", false}, {"cluster", true}} {
		b.Run(bc.name, func(b *testing.B) {
			e := &Engine{clock: clock.Real(), opts: Options{Host: "a"}}
			e.lease.base = e.clock.Now()
			if bc.lease {
				e.SetLease(e.clock.Now().Add(time.Hour))
			}
			ctx := context.Background()
			now := e.clock.Now()
			b.ReportAllocs()
			for b.Loop() {
				if err := e.awaitLease(ctx, now); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
