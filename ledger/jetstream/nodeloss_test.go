package jetstream_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/internal/testing/natstest"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/ledger/jetstream"
	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"
)

// nodeLossBound is the longest an Update may take while the node that
// leads the stream and holds a host's consumer goes down. nats.go's ordered
// consumer took about twelve seconds; what remains is the stream's leader
// election and a publish sent to the lost node (publishTimeout).
const nodeLossBound = 5 * time.Second

// writer runs Updates one after another on a store, keeping the longest
// latency and how many committed.
type writer struct {
	mu      sync.Mutex
	done    int
	longest time.Duration
	err     error
}

// run writes until stop is closed (an Update under way ends first, so
// that every increment is counted).
func (w *writer) run(stop <-chan struct{}, s *jetstream.Store) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		start := time.Now()
		err := s.Update(context.Background(), incrementFn)
		took := time.Since(start)
		w.mu.Lock()
		w.err = err
		if err == nil {
			w.done++
			w.longest = max(w.longest, took)
		}
		w.mu.Unlock()
		if err != nil {
			return
		}
	}
}

func (w *writer) state() (int, time.Duration, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.done, w.longest, w.err
}

// TestNodeLossLatency: two hosts of an R3 cluster write one after another
// without pause; the node that leads the stream and holds a host's stream
// consumer goes down. No Update of either host takes nodeLossBound or
// longer, and every increment is on both hosts.
func TestNodeLossLatency(t *testing.T) {
	c := natstest.RunCluster(t, 3)
	a, b := twoHosts(t, c.URLs(), 3)
	increment(t, a)
	increment(t, b)
	nc := connect(t, c.URLs())
	name := optionsFor(t.Name(), 3).Stream
	stream := streamOf(t, nc, name)

	// The lost node leads JetStream (so consumers cannot be created until
	// another is elected) and the stream.
	var target string
	for _, n := range c.Nodes {
		if n.Server().JetStreamIsLeader() {
			target = n.Name()
		}
	}
	moveStreamLeader(t, nc, stream, target)
	lister := stream.ListConsumers(context.Background())
	for info := range lister.Info() {
		if info.Cluster != nil {
			t.Logf("consumer %s on %s", info.Name, info.Cluster.Leader)
		}
	}
	if err := lister.Err(); err != nil {
		t.Logf("listing the consumers: %v", err)
	}

	stop := make(chan struct{})
	writers := []*writer{{}, {}}
	var wg sync.WaitGroup
	for i, s := range []*jetstream.Store{a, b} {
		wg.Go(func() { writers[i].run(stop, s) })
	}
	waitDone := func(n []int, what string) {
		checkfor.Nil(t, time.Minute, 10*time.Millisecond, func() error {
			for i, w := range writers {
				if done, _, err := w.state(); done < n[i] && err == nil {
					return fmt.Errorf("writer %d did %d updates, want %d: %s", i, done, n[i], what)
				}
			}
			return nil
		})
	}
	waitDone([]int{20, 20}, "20 updates from each host before the loss")
	after := make([]int, len(writers))
	for i, w := range writers {
		done, _, _ := w.state()
		after[i] = done + 40
	}
	lost := time.Now()
	nodeOf(t, c, target).Shutdown()
	t.Logf("node %s (meta and stream leader) shut down in %v", target, time.Since(lost))
	waitDone(after, "40 more updates from each host after the loss")
	close(stop)
	wg.Wait()

	total := uint64(2)
	for i, w := range writers {
		done, longest, err := w.state()
		if err != nil {
			t.Fatalf("host %d: update: %v", i, err)
		}
		t.Logf("host %d: %d updates, the longest took %v", i, done, longest)
		if longest >= nodeLossBound {
			t.Errorf("host %d: an update took %v across the node loss, want < %v", i, longest, nodeLossBound)
		}
		total += uint64(done)
	}
	for name, s := range map[string]*jetstream.Store{"a": a, "b": b} {
		mustView(t, s, func(tx ledger.Tx) error {
			if p, _, _ := tx.Checkpoint("sub-a"); p != total {
				t.Errorf("host %s: checkpoint %d after %d increments", name, p, total)
			}
			return nil
		})
	}
}

// moveStreamLeader asks the stream's leader to step down in favour of
// node, until node leads it.
func moveStreamLeader(t *testing.T, nc *nats.Conn, stream njs.Stream, node string) {
	t.Helper()
	req, _ := json.Marshal(map[string]any{"placement": map[string]string{"preferred": node}})
	subject := fmt.Sprintf("$JS.API.STREAM.LEADER.STEPDOWN.%s", stream.CachedInfo().Config.Name)
	checkfor.Nil(t, time.Minute, 100*time.Millisecond, func() error {
		info, err := stream.Info(context.Background())
		if err != nil {
			return err
		}
		if info.Cluster == nil {
			return fmt.Errorf("stream info without cluster info, want the leader on %s", node)
		}
		if info.Cluster.Leader == node {
			return nil
		}
		_, _ = nc.Request(subject, req, 2*time.Second)
		return fmt.Errorf("stream leader on %q, want %s", info.Cluster.Leader, node)
	})
}

func nodeOf(t *testing.T, c *natstest.Cluster, name string) *natstest.Node {
	t.Helper()
	for _, n := range c.Nodes {
		if n.Name() == name {
			return n
		}
	}
	t.Fatalf("no node %q", name)
	return nil
}
