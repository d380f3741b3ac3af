package jetstream_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/internal/testing/natstest"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/ledger/jetstream"
	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"
)

// incrementFn adds one to sub-a's checkpoint and queues a notification.
func incrementFn(tx ledger.Tx) error {
	p, _, err := tx.Checkpoint("sub-a")
	if err != nil {
		return err
	}
	return errors.Join(tx.Notify(ledger.Notification{Type: "parked"}), tx.SetCheckpoint("sub-a", p+1))
}

// increment runs incrementFn in an Update.
func increment(t *testing.T, s ledger.Store) {
	t.Helper()
	mustUpdate(t, s, incrementFn)
}

// expectCount checks that s holds n increments.
func expectCount(t *testing.T, s ledger.Store, what string, n uint64) {
	t.Helper()
	mustView(t, s, func(tx ledger.Tx) error {
		p, _, _ := tx.Checkpoint("sub-a")
		ns, _ := tx.Notifications(0, 1000)
		if p != n || uint64(len(ns)) != n {
			t.Errorf("%s: checkpoint %d and %d notifications, want %d", what, p, len(ns), n)
		}
		return nil
	})
}

func closeStore(t *testing.T, s *jetstream.Store) {
	t.Helper()
	if err := s.Close(context.Background()); err != nil {
		t.Fatalf("close: %v", err)
	}
}

func streamOf(t *testing.T, nc *nats.Conn, name string) njs.Stream {
	t.Helper()
	js, err := njs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	var st njs.Stream
	checkfor.Nil(t, time.Minute, 50*time.Millisecond, func() error {
		st, err = js.Stream(context.Background(), name)
		return err
	})
	return st
}

// TestReopen: a reopen with its cache replays only the stream's tail (it
// opens even after the transactions it applied were purged from the
// stream); an empty or corrupt cache is rebuilt from the whole stream; a
// cache of a stream since deleted and created again is rebuilt from the
// new one; a new cache on a stream whose start was purged is refused.
func TestReopen(t *testing.T) {
	nc := connect(t, natstest.RunServer(t).URL())
	o := optionsFor(t.Name(), 1)
	o.Dir = t.TempDir()
	a := open(t, nc, o)
	for range 10 {
		increment(t, a)
	}
	closeStore(t, a)

	fresh := o
	fresh.Dir = t.TempDir()
	c := open(t, nc, fresh)
	expectCount(t, c, "a new cache", 10)
	closeStore(t, c)

	manifest := filepath.Join(fresh.Dir, o.Stream, "MANIFEST")
	if err := os.WriteFile(manifest, []byte("not a manifest"), 0o644); err != nil {
		t.Fatal(err)
	}
	c = open(t, nc, fresh)
	expectCount(t, c, "a corrupt cache, rebuilt", 10)
	closeStore(t, c)

	// Only the tail after the cache's applied sequence is needed now.
	if err := streamOf(t, nc, o.Stream).Purge(context.Background(), njs.WithPurgeSequence(11)); err != nil {
		t.Fatal(err)
	}
	a = open(t, nc, o)
	expectCount(t, a, "the reopened cache", 10)
	increment(t, a)
	expectCount(t, a, "the reopened cache, written to", 11)
	closeStore(t, a)

	lost := o
	lost.Dir = t.TempDir()
	if s, err := jetstream.Open(context.Background(), nc, lost); err == nil || !strings.Contains(err.Error(), "removed from the stream") {
		if s != nil {
			closeStore(t, s)
		}
		t.Fatalf("a new cache on a stream without its start: %v, want an error that says so", err)
	}

	// The same name, a new stream: the old cache is not taken for it.
	js, _ := njs.New(nc)
	if err := js.DeleteStream(context.Background(), o.Stream); err != nil {
		t.Fatal(err)
	}
	a = open(t, nc, o)
	expectCount(t, a, "a new stream of the same name", 0)
	increment(t, a)
	expectCount(t, a, "a new stream of the same name, written to", 1)
	closeStore(t, a)
}

// TestNodeDown: the stream's leader of a three-node cluster goes down in
// the middle; writes go on after the election, from two hosts, and the
// node comes back.
func TestNodeDown(t *testing.T) {
	c := natstest.RunCluster(t, 3)
	a, b := twoHosts(t, c.URLs(), 3)
	for range 5 {
		increment(t, a)
	}
	nc := connect(t, c.URLs())
	info, err := streamOf(t, nc, optionsFor(t.Name(), 3).Stream).Info(context.Background())
	if err != nil || info.Cluster == nil {
		t.Fatalf("stream info: %+v, %v", info, err)
	}
	var leader *natstest.Node
	for _, n := range c.Nodes {
		if n.Name() == info.Cluster.Leader {
			leader = n
		}
	}
	if leader == nil {
		t.Fatalf("no node is the stream's leader %q", info.Cluster.Leader)
	}
	leader.Shutdown()
	for i := range 10 {
		if i%2 == 0 {
			increment(t, a)
		} else {
			increment(t, b)
		}
	}
	expectCount(t, b, "with a node down", 15)
	leader.Restart()
	c.WaitForMetaLeader(t)
	for range 5 {
		increment(t, b)
	}
	expectCount(t, a, "with the node back", 20)
}

// TestTooBig: a transaction whose message would pass the server's max
// payload fails with ErrTooBig and commits nothing, even when the closure
// ignores the failure.
func TestTooBig(t *testing.T) {
	nc := connect(t, natstest.RunServer(t).URL())
	o := optionsFor(t.Name(), 1)
	o.Dir = t.TempDir()
	s := open(t, nc, o)
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	big := make([]byte, nc.MaxPayload())
	err := s.Update(context.Background(), func(tx ledger.Tx) error {
		return errors.Join(tx.SetCheckpoint("sub-a", 1), tx.SetMeta("sub-a", "big", big))
	})
	if !errors.Is(err, ledger.ErrTooBig) {
		t.Fatalf("an Update past the max payload: %v, want ErrTooBig", err)
	}
	mustView(t, s, func(tx ledger.Tx) error {
		if _, ok, _ := tx.Checkpoint("sub-a"); ok {
			t.Error("part of a too-big transaction was committed")
		}
		return nil
	})
}
