package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/jsapi"
	"github.com/berthhq/berth/internal/testing/natstest"
	"github.com/nats-io/nats.go/jetstream"
)

// TestOpenWatchAsksAgainUntilTheBucketAnswers: Open's watch of the
// membership, asked while the bucket's stream has lost two of its three
// nodes, is not answered within NATS's request timeout; it is asked again
// until the nodes are back, and the watcher it returns sees the members.
// (A CI run's host failed to open when one watch went unanswered for 5 s on
// a loaded machine.)
func TestOpenWatchAsksAgainUntilTheBucketAnswers(t *testing.T) {
	c := natstest.RunCluster(t, 3)
	js, err := jetstream.New(connect(t, c.Nodes[0].URL()))
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Bucket: DefaultBucket, LeaseTTL: 10 * time.Second, Replicas: 3}
	kv, err := openBucket(t.Context(), js, &opts)
	if err != nil {
		t.Fatal(err)
	}
	c.Nodes[1].Shutdown()
	c.Nodes[2].Shutdown()
	// Back after more than a request's timeout (jetstream's default, 5 s):
	// the first ask has failed by then. The nodes restart on the test's
	// goroutine (Restart fails the test), the watch is asked on another.
	const down = 6 * time.Second
	type answer struct {
		w    jetstream.KeyWatcher
		err  error
		took time.Duration
	}
	answered := make(chan answer, 1)
	start := time.Now()
	go func() {
		w, err := openWatch(t.Context(), t.Context(), kv, 60*time.Second)
		answered <- answer{w, err, time.Since(start)}
	}()
	time.Sleep(down)
	c.Nodes[1].Restart()
	c.Nodes[2].Restart()
	var a answer
	select {
	case a = <-answered:
	case <-time.After(90 * time.Second):
		t.Fatal("the watch, asked for a minute, did not return")
	}
	if a.err != nil {
		t.Fatalf("the watch, asked for a minute: %v", a.err)
	}
	w := a.w
	defer w.Stop()
	if a.took < down {
		t.Fatalf("a watch answered after %v, with two of the bucket's three nodes down until %v", a.took, down)
	}
	for e := range w.Updates() {
		if e == nil {
			break // the initial values are all replayed: none yet
		}
	}
	// The stream may still be electing its leader.
	if _, err := jsapi.Retry(t.Context(), jsapi.Policy{}, jsapi.Transient, func(ctx context.Context) (uint64, error) {
		return kv.Put(ctx, "h1", []byte("{}"))
	}); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-w.Updates():
		if e == nil || e.Key() != "h1" {
			t.Fatalf("the watcher saw %v, want h1's key", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the watcher did not see h1's key within 10 s")
	}
}
