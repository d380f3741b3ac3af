package jetstream_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/internal/testing/natstest"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/ledger/jetstream"
)

// twoHosts opens two Stores on one stream, each with its own connection and
// cache directory, as two Berth hosts of one deployment have them.
func twoHosts(t *testing.T, urls string, replicas int) (a, b *jetstream.Store) {
	t.Helper()
	base := optionsFor(t.Name(), replicas)
	hosts := make([]*jetstream.Store, 2)
	for i := range hosts {
		o := base
		o.Dir = t.TempDir()
		hosts[i] = open(t, connect(t, urls), o)
		t.Cleanup(func() { _ = hosts[i].Close(context.Background()) })
	}
	return hosts[0], hosts[1]
}

func mustUpdate(t *testing.T, s ledger.Store, fn func(tx ledger.Tx) error) {
	t.Helper()
	if err := s.Update(context.Background(), fn); err != nil {
		t.Fatalf("update: %v", err)
	}
}

func mustView(t *testing.T, s ledger.Store, fn func(tx ledger.Tx) error) {
	t.Helper()
	if err := s.View(context.Background(), fn); err != nil {
		t.Fatalf("view: %v", err)
	}
}

// clusters are the deployments the tests of several hosts run on: one
// node, and a three-node cluster with three replicas.
var clusters = []struct {
	name     string
	replicas int
	urls     func(t *testing.T) string
}{
	{"R1", 1, func(t *testing.T) string { return natstest.RunServer(t).URL() }},
	{"R3", 3, func(t *testing.T) string { return natstest.RunCluster(t, 3).URLs() }},
}

// TestHosts runs the cases of two hosts sharing a ledger on one node and on
// a three-node cluster.
func TestHosts(t *testing.T) {
	cases := []struct {
		name string
		fn   func(t *testing.T, a, b *jetstream.Store)
	}{
		{"ConcurrentUpdates", testHostsConcurrent},
		{"Fencing", testHostsFencing},
		{"SeeEachOther", testHostsSeeEachOther},
		{"ReadOnlyUpdateSeesTheOther", testHostsReadOnlyUpdate},
		{"LocalView", testHostsLocalView},
		{"Capsule", testHostsCapsule},
	}
	for _, c := range clusters {
		t.Run(c.name, func(t *testing.T) {
			urls := c.urls(t)
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					a, b := twoHosts(t, urls, c.replicas)
					tc.fn(t, a, b)
				})
			}
		})
	}
}

// testHostsConcurrent: read-modify-write transactions from both hosts at
// once each see the others' commits — no lost update, no outbox Seq given
// twice — as the contract's ConcurrentUpdates asks of one host.
func testHostsConcurrent(t *testing.T, a, b *jetstream.Store) {
	const workers, each = 3, 20
	var wg sync.WaitGroup
	errs := make(chan error, 2*workers*each)
	for _, s := range []*jetstream.Store{a, b} {
		for range workers {
			wg.Go(func() {
				for range each {
					errs <- s.Update(context.Background(), func(tx ledger.Tx) error {
						p, _, err := tx.Checkpoint("sub-a")
						if err != nil {
							return err
						}
						if err := tx.Notify(ledger.Notification{Type: "parked"}); err != nil {
							return err
						}
						return tx.SetCheckpoint("sub-a", p+1)
					})
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent update: %v", err)
		}
	}
	const want = 2 * workers * each
	for name, s := range map[string]*jetstream.Store{"a": a, "b": b} {
		mustView(t, s, func(tx ledger.Tx) error {
			if p, _, _ := tx.Checkpoint("sub-a"); p != want {
				t.Errorf("host %s: checkpoint %d after %d increments", name, p, want)
			}
			ns, _ := tx.Notifications(0, want+10)
			if len(ns) != want {
				t.Fatalf("host %s: %d notifications, want %d", name, len(ns), want)
			}
			for i, n := range ns {
				if n.Seq != uint64(i+1) {
					t.Fatalf("host %s: notification %d has Seq %d", name, i, n.Seq)
				}
			}
			return nil
		})
	}
}

// testHostsFencing: host A fences its transaction with its claim; host B
// claims the partition after A's snapshot and before A commits; A's commit
// fails with ErrFenced and none of its writes land, on either host.
func testHostsFencing(t *testing.T, a, b *jetstream.Store) {
	mustUpdate(t, a, func(tx ledger.Tx) error { return tx.ClaimPartition("sub-a", 3, "host-a", 1) })
	runs := 0
	err := a.Update(context.Background(), func(tx ledger.Tx) error {
		runs++
		if err := tx.Fence("sub-a", 3, "host-a", 1); err != nil {
			return err
		}
		if runs == 1 {
			// B takes the partition over while A's transaction runs.
			mustUpdate(t, b, func(tx ledger.Tx) error { return tx.ClaimPartition("sub-a", 3, "host-b", 2) })
		}
		return errors.Join(
			tx.SetPartitionCheckpoint("sub-a", 3, 99),
			tx.SetMeta("sub-a", "written-by", []byte("host-a")),
		)
	})
	if !errors.Is(err, ledger.ErrFenced) {
		t.Fatalf("A's fenced update: %v, want ErrFenced", err)
	}
	if runs != 2 {
		t.Errorf("A's closure ran %d times, want 2 (aborted by B's claim, then fenced)", runs)
	}
	for name, s := range map[string]*jetstream.Store{"a": a, "b": b} {
		mustView(t, s, func(tx ledger.Tx) error {
			if h, e, _ := tx.PartitionOwner("sub-a", 3); h != "host-b" || e != 2 {
				t.Errorf("host %s: owner %q at %d, want host-b at 2", name, h, e)
			}
			if _, ok, _ := tx.PartitionCheckpoint("sub-a", 3); ok {
				t.Errorf("host %s: the fenced checkpoint landed", name)
			}
			if _, err := tx.Meta("sub-a", "written-by"); !errors.Is(err, ledger.ErrNotFound) {
				t.Errorf("host %s: the fenced meta landed (%v)", name, err)
			}
			return nil
		})
	}
	// B, the owner now, writes.
	mustUpdate(t, b, func(tx ledger.Tx) error {
		if err := tx.Fence("sub-a", 3, "host-b", 2); err != nil {
			return err
		}
		return tx.SetPartitionCheckpoint("sub-a", 3, 7)
	})
	mustView(t, a, func(tx ledger.Tx) error {
		if p, _, _ := tx.PartitionCheckpoint("sub-a", 3); p != 7 {
			t.Errorf("A sees checkpoint %d, want B's 7", p)
		}
		return nil
	})
}

// testHostsSeeEachOther: what one host commits, the other's next View
// sees, each way, without waiting.
func testHostsSeeEachOther(t *testing.T, a, b *jetstream.Store) {
	for i := range 5 {
		from, to := a, b
		if i%2 == 1 {
			from, to = b, a
		}
		key := fmt.Sprintf("k%d", i)
		mustUpdate(t, from, func(tx ledger.Tx) error {
			return errors.Join(tx.ProjectionPut("sub-a", key, []byte(key)), tx.SetCheckpoint("sub-a", uint64(i+1)))
		})
		mustView(t, to, func(tx ledger.Tx) error {
			if v, err := tx.ProjectionGet("sub-a", key); err != nil || string(v) != key {
				t.Errorf("write %d: the other host reads %q, %v", i, v, err)
			}
			if p, _, _ := tx.Checkpoint("sub-a"); p != uint64(i+1) {
				t.Errorf("write %d: the other host's checkpoint %d", i, p)
			}
			return nil
		})
	}
}

// testHostsReadOnlyUpdate: an Update that only reads sees what the other
// host committed before it began, as a View does — a caller deciding from
// it (an engine restarting from checkpoints another host has just reset)
// must not act on a stale cache.
func testHostsReadOnlyUpdate(t *testing.T, a, b *jetstream.Store) {
	for i := range 20 {
		mustUpdate(t, a, func(tx ledger.Tx) error { return tx.SetCheckpoint("sub-r", uint64(i+1)) })
		var p uint64 // what the last run of the closure read (it may run more than once)
		mustUpdate(t, b, func(tx ledger.Tx) error {
			var err error
			p, _, err = tx.Checkpoint("sub-r")
			return err
		})
		if p != uint64(i+1) {
			t.Errorf("write %d: a read-only Update on the other host reads checkpoint %d", i+1, p)
		}
	}
}

// testHostsLocalView: a LocalView sees this host's own commits at once (an
// Update returns once its host applied it) and the other host's once this
// host's copy has applied them, without a View's round trip.
func testHostsLocalView(t *testing.T, a, b *jetstream.Store) {
	checkpoint := func(s *jetstream.Store) uint64 {
		var p uint64
		if err := ledger.LocalView(t.Context(), s, func(tx ledger.Tx) error {
			var err error
			p, _, err = tx.Checkpoint("sub-l")
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return p
	}
	mustUpdate(t, a, func(tx ledger.Tx) error { return tx.SetCheckpoint("sub-l", 7) })
	if p := checkpoint(a); p != 7 {
		t.Fatalf("a's LocalView after its own Update reads checkpoint %d, want 7", p)
	}
	checkfor.Nil(t, 10*time.Second, 5*time.Millisecond, func() error {
		if p := checkpoint(b); p != 7 {
			return fmt.Errorf("b's copy reads checkpoint %d, want a's commit of 7", p)
		}
		return nil
	})
}

// testHostsCapsule: a capsule one host records beside its park (256 KiB,
// as large as the engine's default cap lets one grow) the other host
// reads, also once the other host resolved the record.
func testHostsCapsule(t *testing.T, a, b *jetstream.Store) {
	c := bytes.Repeat([]byte("berth-capsule/1 "), 16<<10)
	r := &ledger.Record{Subscription: "sub-c", AggregateType: "Order", AggregateID: "o-1", State: ledger.StateWaiting,
		History: []ledger.Entry{{Time: time.Now(), Action: "parked"}}}
	mustUpdate(t, a, func(tx ledger.Tx) error {
		return errors.Join(tx.PutParked(r), tx.PutCapsule("sub-c", "Order", "o-1", c))
	})
	read := func(s *jetstream.Store, when string) {
		t.Helper()
		mustView(t, s, func(tx ledger.Tx) error {
			if got, err := tx.Capsule("sub-c", "Order", "o-1"); err != nil || !bytes.Equal(got, c) {
				t.Errorf("%s: Capsule reads %d bytes, %v; want the %d written", when, len(got), err, len(c))
			}
			return nil
		})
	}
	read(b, "the other host")
	mustUpdate(t, b, func(tx ledger.Tx) error { return tx.DeleteParked("sub-c", "Order", "o-1") })
	read(a, "the first host, after the other resolved the record")
}
