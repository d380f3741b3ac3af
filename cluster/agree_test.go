package cluster

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/internal/testing/natstest"
	"github.com/nats-io/nats.go/jetstream"
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
	if gone, err := a.c.memberGone(t.Context(), "h2"); err != nil || !gone {
		t.Errorf("the refused host joined: its key is in the membership bucket (%v)", err)
	}
	startHost(t, n.URL(), "h3", st, Options{Subscriptions: subs, Partitions: 16})
}

// TestKeyGoneAsksTheLeader: keyGone, read from the bucket's leader, tells a
// key that is there from one never written, deleted, or expired (its
// limit marker).
func TestKeyGoneAsksTheLeader(t *testing.T) {
	n := natstest.RunServer(t)
	nc := connect(t, n.URL())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: "gone", TTL: time.Second, LimitMarkerTTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	gone := func(key string) bool {
		t.Helper()
		g, err := keyGone(t.Context(), nc, "gone", key)
		if err != nil {
			t.Fatalf("keyGone(%q): %v", key, err)
		}
		return g
	}
	if !gone("never") {
		t.Error("a key never written is not gone")
	}
	for _, k := range []string{"deleted", "expiring"} {
		if _, err := kv.Create(t.Context(), k, []byte("{}")); err != nil {
			t.Fatal(err)
		}
		if gone(k) {
			t.Errorf("%s, just written, is gone", k)
		}
	}
	if err := kv.Delete(t.Context(), "deleted"); err != nil {
		t.Fatal(err)
	}
	if !gone("deleted") {
		t.Error("a deleted key is not gone")
	}
	checkfor.Nil(t, 10*time.Second, 50*time.Millisecond, func() error {
		if !gone("expiring") {
			return errors.New("a key past its TTL is not gone")
		}
		return nil
	})
}
