package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/internal/testing/natstest"
)

// TestViewAccessors: the settings an operator's view shows are the
// options', and Reachable asks the server — it answers while the NATS node
// runs and fails, within its context, once the node is down, though the
// host's own view of the members is still there.
func TestViewAccessors(t *testing.T) {
	n := natstest.RunServer(t)
	h := startHost(t, n.URL(), "h1", openLedger(t), Options{Subscriptions: subs, LeaseTTL: 4 * time.Second, Partitions: 8})
	if got := h.c.LeaseTTL(); got != 4*time.Second {
		t.Errorf("LeaseTTL %v, want 4s", got)
	}
	if got := h.c.Partitions(); got != 8 {
		t.Errorf("Partitions %d, want 8", got)
	}
	if err := h.c.Reachable(t.Context()); err != nil {
		t.Fatalf("Reachable with the node up: %v", err)
	}
	// The host's view of the members fills in from its watcher, after Open.
	checkfor.Nil(t, 10*time.Second, 5*time.Millisecond, func() error {
		if ms := h.c.Members(); len(ms) != 1 {
			return fmt.Errorf("the host sees members %+v, want itself", ms)
		}
		return nil
	})
	n.Shutdown()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	if err := h.c.Reachable(ctx); err == nil {
		t.Fatal("Reachable with the node down: no error")
	}
	if ms := h.c.Members(); len(ms) != 1 || !ms[0].Self {
		t.Errorf("members after the node went down: %+v, want this host's last view", ms)
	}
	n.Restart() // so that the host leaves at once when the test ends
}
