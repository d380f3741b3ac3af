package cluster

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/natstest"
)

// TestPartitionCountMustAgree: a host whose subscription.partitions differs
// from a live host's is refused at Open, naming both counts and the host,
// and joins nothing; a host with the same count joins.
func TestPartitionCountMustAgree(t *testing.T) {
	n := natstest.RunServer(t)
	st := openLedger(t)
	a := startHost(t, n.URL(), "h1", st, Options{Subscriptions: subs, Partitions: 16})

	_, err := Open(t.Context(), connect(t, n.URL()), Options{Host: "h2", Ledger: st, Engine: newFakeEngine(time.Now),
		Subscriptions: subs, Partitions: 8})
	if !errors.Is(err, errDisagree) || !strings.Contains(err.Error(), "subscription.partitions is 8") ||
		!strings.Contains(err.Error(), `host "h1" runs with 16`) {
		t.Fatalf("a host with 8 partitions beside one with 16: %v", err)
	}
	// Asked of the server: a's own view of the members fills in
	// asynchronously, and would not show a key written meanwhile anyway.
	if gone, err := memberGone(t.Context(), a.c.kv, "h2"); err != nil || !gone {
		t.Errorf("the refused host joined: its key is in the membership bucket (%v)", err)
	}
	startHost(t, n.URL(), "h3", st, Options{Subscriptions: subs, Partitions: 16})
}
