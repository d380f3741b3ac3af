package jetstream_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/ledger/jetstream"
	"github.com/nats-io/nats.go"
)

// host opens a Store on o with a cache directory of its own, as another
// Berth host of the deployment, closed when the test ends.
func host(t *testing.T, urls string, o jetstream.Options) *jetstream.Store {
	t.Helper()
	o.Dir = t.TempDir()
	s := open(t, connect(t, urls), o)
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

// compacting returns options that compact every every messages, keeping
// keep, with a cache directory of its own.
func compacting(t *testing.T, replicas, every, keep int) jetstream.Options {
	o := optionsFor(t.Name(), replicas)
	o.Dir, o.CompactEvery, o.CompactKeep = t.TempDir(), every, keep
	return o
}

// waitCompacted waits until the stream starts after sequence after: a
// compaction purged it.
func waitCompacted(t *testing.T, nc *nats.Conn, stream string, after uint64) uint64 {
	t.Helper()
	st := streamOf(t, nc, stream)
	var first uint64
	checkfor.Nil(t, time.Minute, 20*time.Millisecond, func() error {
		info, err := st.Info(context.Background())
		if err != nil {
			return err
		}
		if first = info.State.FirstSeq; first <= after {
			return fmt.Errorf("stream %s starts at %d, want it purged past %d", stream, first, after)
		}
		return nil
	})
	return first
}

// records writes n projections (k0…) and deletes every third, and counts
// each write with incrementFn.
func records(t *testing.T, s ledger.Store, n int) {
	t.Helper()
	for i := range n {
		key := fmt.Sprintf("k%d", i)
		mustUpdate(t, s, func(tx ledger.Tx) error {
			return errors.Join(tx.ProjectionPut("sub-a", key, []byte(key)), incrementFn(tx))
		})
		if i%3 == 0 {
			mustUpdate(t, s, func(tx ledger.Tx) error { return tx.ProjectionDelete("sub-a", key) })
		}
	}
}

// expectRecords checks that s holds what records(n) wrote, total
// increments in all.
func expectRecords(t *testing.T, s ledger.Store, what string, n int, total uint64) {
	t.Helper()
	expectCount(t, s, what, total)
	mustView(t, s, func(tx ledger.Tx) error {
		for i := range n {
			key := fmt.Sprintf("k%d", i)
			v, err := tx.ProjectionGet("sub-a", key)
			switch {
			case i%3 == 0 && !errors.Is(err, ledger.ErrNotFound):
				t.Errorf("%s: deleted %s reads %q, %v", what, key, v, err)
			case i%3 != 0 && (err != nil || string(v) != key):
				t.Errorf("%s: %s reads %q, %v", what, key, v, err)
			}
		}
		return nil
	})
}

// TestCompaction: a host compacts the stream as it grows; then a host with
// an empty cache opens on the purged stream, restores the snapshot and sees
// every record (deletes included); both go on writing and see each other.
func TestCompaction(t *testing.T) {
	for _, c := range clusters {
		t.Run(c.name, func(t *testing.T) {
			urls := c.urls(t)
			o := compacting(t, c.replicas, 20, 5)
			a := host(t, urls, o)
			const n = 30 // 40 messages and more
			records(t, a, n)
			waitCompacted(t, connect(t, urls), o.Stream, 1)

			b := host(t, urls, o)
			expectRecords(t, b, "a new host on the compacted stream", n, n)
			increment(t, b)
			expectRecords(t, a, "the compacting host, after the new host wrote", n, n+1)
			increment(t, a)
			expectCount(t, b, "the new host, after the compacting host wrote", n+2)
		})
	}
}

// TestCompactionInFlight: a transaction whose snapshot is before a
// compaction point (another host compacts while its closure runs) aborts
// and runs again rather than commit; what it wrote the second time is
// there, on a host restored from the snapshot too.
func TestCompactionInFlight(t *testing.T) {
	for _, c := range clusters {
		t.Run(c.name, func(t *testing.T) {
			urls := c.urls(t)
			o := compacting(t, c.replicas, -1, 1)
			a := host(t, urls, o)
			b := host(t, urls, o)
			for range 5 {
				increment(t, a)
			}
			runs := 0
			mustUpdate(t, a, func(tx ledger.Tx) error {
				runs++
				if runs == 1 {
					if err := b.Compact(context.Background()); err != nil {
						t.Fatalf("compact: %v", err)
					}
				}
				return errors.Join(tx.SetMeta("sub-a", "run", []byte{byte(runs)}), incrementFn(tx))
			})
			if runs != 2 {
				t.Errorf("the closure ran %d times, want 2 (aborted by the compaction point, then committed)", runs)
			}
			waitCompacted(t, connect(t, urls), o.Stream, 1)
			c := host(t, urls, o)
			for name, s := range map[string]ledger.Store{"a": a, "b": b, "restored": c} {
				expectCount(t, s, "host "+name, 6)
				mustView(t, s, func(tx ledger.Tx) error {
					if v, err := tx.Meta("sub-a", "run"); err != nil || len(v) != 1 || v[0] != 2 {
						t.Errorf("host %s: the run that committed %v, %v; want 2", name, v, err)
					}
					return nil
				})
			}
		})
	}
}

// TestCompactionConcurrent: two hosts write at once while the stream is
// compacted again and again under them; no increment is lost or applied
// twice, on either host or on one restored from the last snapshot.
func TestCompactionConcurrent(t *testing.T) {
	for _, c := range clusters {
		t.Run(c.name, func(t *testing.T) {
			urls := c.urls(t)
			// Compaction points every 15 messages, keeping 60 behind each:
			// more than a host under load lags, so neither host is purged
			// past and restores in place (TestCompactionBehind's case, in
			// which an Update waiting meanwhile does not learn its outcome).
			o := compacting(t, c.replicas, 15, 60)
			// testHostsConcurrent checks both hosts: no lost update, no
			// outbox Seq given twice.
			testHostsConcurrent(t, host(t, urls, o), host(t, urls, o))
			waitCompacted(t, connect(t, urls), o.Stream, 1)
			expectCount(t, host(t, urls, o), "a host restored from the last snapshot", 2*3*20)
		})
	}
}

// TestCompactionBehind: a running host that falls behind compactions by
// more than CompactKeep (it applies nothing meanwhile) restores the latest
// snapshot when it finds the stream purged past it, and goes on: it sees
// every record, not one deleted meanwhile, and writes again.
func TestCompactionBehind(t *testing.T) {
	for _, c := range clusters {
		t.Run(c.name, func(t *testing.T) {
			urls := c.urls(t)
			o := compacting(t, c.replicas, 40, 5)
			a := host(t, urls, o)
			b := host(t, urls, o)
			increment(t, b)
			mustUpdate(t, a, func(tx ledger.Tx) error { return tx.ProjectionPut("sub-a", "gone", []byte("x")) })
			mustView(t, b, func(tx ledger.Tx) error { _, err := tx.ProjectionGet("sub-a", "gone"); return err })
			release := b.HoldApply()
			// More than the consumer's buffer of 500 deliveries, so that
			// B's consumer meets the purge.
			const n = 600 // 800 messages and more
			records(t, a, n)
			// Then a delete, and enough after it to compact past it.
			mustUpdate(t, a, func(tx ledger.Tx) error { return tx.ProjectionDelete("sub-a", "gone") })
			nc := connect(t, urls)
			info, err := streamOf(t, nc, o.Stream).Info(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			const more = 60
			for range more {
				increment(t, a)
			}
			waitCompacted(t, nc, o.Stream, info.State.LastSeq)
			release()
			expectRecords(t, b, "the host that fell behind", n, n+1+more)
			mustView(t, b, func(tx ledger.Tx) error {
				if v, err := tx.ProjectionGet("sub-a", "gone"); !errors.Is(err, ledger.ErrNotFound) {
					t.Errorf("a projection deleted while the host was behind reads %q, %v", v, err)
				}
				return nil
			})
			increment(t, b)
			expectCount(t, a, "the compacting host, after the other wrote", n+2+more)
		})
	}
}
