package eventlog_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/berthhq/berth/eventlog"
)

// BenchmarkAppend appends one commit of one ~100-byte event per op, each to
// its own aggregate at ExpectedVersion 0, on disk with Badger's default
// sizes: without fsync (the default) and with SyncWrites.
func BenchmarkAppend(b *testing.B) {
	for _, sync := range []bool{false, true} {
		b.Run(fmt.Sprintf("sync=%v", sync), func(b *testing.B) {
			ctx := context.Background()
			l, err := eventlog.Open(b.TempDir(), eventlog.Options{SyncWrites: sync})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close(ctx)
			payload := []byte(`{"orderId":"o-123456","sku":"SKU-0001","quantity":3,"price":"19.99","currency":"EUR"}`)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				_, err := l.Append(ctx, eventlog.AppendRequest{
					AggregateType: "order", AggregateID: fmt.Sprintf("o-%d", i), ExpectedVersion: 0,
					Events: []eventlog.Event{{Type: "OrderPlaced", Payload: payload}},
				})
				if err != nil {
					b.Fatal(err)
				}
			}
		})
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
