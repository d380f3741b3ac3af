package jetstream_test

import (
	"context"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/natstest"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/ledger/ledgertest"
)

// BenchmarkUpdate is the latency of one Update, one after another, on the
// Badger store and on JetStream with one replica and with three (a
// three-node in-process cluster), in the same run: "checkpoint" is one
// SetCheckpoint, "park" parks a new aggregate (PutParked with a one-entry
// history, Notify, SetCheckpoint), as ledger's BenchmarkPark. tx/s is what
// one host commits a second, its Updates running one at a time.
func BenchmarkUpdate(b *testing.B) {
	stores := []struct {
		name string
		open func(b *testing.B) ledger.Store
	}{
		{"badger", func(b *testing.B) ledger.Store {
			s, err := ledger.Open(b.TempDir(), ledger.Options{})
			if err != nil {
				b.Fatal(err)
			}
			return s
		}},
		{"jetstream-R1", func(b *testing.B) ledger.Store {
			o := optionsFor(b.Name(), 1)
			o.Dir = b.TempDir()
			return open(b, connect(b, natstest.RunServer(b).URL()), o)
		}},
		{"jetstream-R3", func(b *testing.B) ledger.Store {
			o := optionsFor(b.Name(), 3)
			o.Dir = b.TempDir()
			return open(b, connect(b, natstest.RunCluster(b, 3).URLs()), o)
		}},
	}
	ops := []struct {
		name string
		fn   func(i int) func(tx ledger.Tx) error
	}{
		{"checkpoint", func(i int) func(tx ledger.Tx) error {
			return func(tx ledger.Tx) error { return tx.SetCheckpoint("orders.projection", uint64(i)) }
		}},
		{"park", func(i int) func(tx ledger.Tx) error { return ledgertest.ParkTx(i, time.Now().UTC()) }},
	}
	for _, st := range stores {
		for _, op := range ops {
			b.Run(st.name+"/"+op.name, func(b *testing.B) {
				s := st.open(b)
				b.Cleanup(func() { _ = s.Close(context.Background()) })
				ctx := context.Background()
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					if err := s.Update(ctx, op.fn(i)); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tx/s")
			})
		}
	}
}

// BenchmarkScale is ledgertest.BenchmarkScale on JetStream (one in-process
// server, one replica): the parked reads, which every host answers from
// its cache, and a park, at 10,000 and 100,000 parked (BERTH_SCALE for
// others).
func BenchmarkScale(b *testing.B) {
	ledgertest.BenchmarkScale(b, func(b *testing.B) ledger.Store {
		o := optionsFor(b.Name(), 1)
		o.Dir = b.TempDir()
		s := open(b, connect(b, natstest.RunServer(b).URL()), o)
		b.Cleanup(func() { _ = s.Close(context.Background()) })
		return s
	}, 250)
}
