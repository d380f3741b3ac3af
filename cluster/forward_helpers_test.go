package cluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/internal/testing/natstest"
	"github.com/berthhq/berth/ledger"
	jsledger "github.com/berthhq/berth/ledger/jetstream"
	"github.com/berthhq/berth/retry"
	"github.com/berthhq/berth/subscription"
	"github.com/nats-io/nats.go"
)

const (
	opsSub        = "orders"
	opsDeployment = "TEST"
)

// handledEvent is one successful delivery, and the host that made it.
type handledEvent struct {
	host    string
	id      string
	version uint64
}

// opsEnv is a deployment of real hosts for the operator calls: one NATS
// node, one Badger event log and one Badger ledger shared by every host,
// each host with its subscription engine, its Cluster (which tells the
// engine what it owns) and its Forwarder.
type opsEnv struct {
	t    *testing.T
	node *natstest.Node
	log  *eventlog.Badger
	// st is the ledger the test reads: the hosts' one Badger ledger, or a
	// Store of its own on their JetStream stream.
	st     ledger.Store
	js     bool
	broken atomic.Bool // aggregates named "bad-…" fail unrecoverably while set
	resets atomic.Int32

	mu      sync.Mutex
	handled []handledEvent
}

// newOpsEnv starts a deployment's shared parts; with js the hosts' ledger
// is on JetStream (each host its own Store on one stream), else one Badger
// ledger.
func newOpsEnv(t *testing.T, js bool) *opsEnv {
	t.Helper()
	e := &opsEnv{t: t, node: natstest.RunServer(t), js: js}
	if e.st = openLedger(t); js {
		e.st = e.ledger("test")
	}
	var err error
	if e.log, err = eventlog.Open(t.TempDir(), eventlog.Options{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.log.Close(context.Background()) })
	e.broken.Store(true)
	return e
}

// opsHost is one host of an opsEnv.
type opsHost struct {
	id  string
	nc  *nats.Conn
	eng *subscription.Engine
	c   *Cluster
	fwd *Forwarder
}

// spec is the subscription every host runs; host names the engine that
// delivers.
func (e *opsEnv) spec(host string) subscription.Spec {
	inv := subscription.InvokerFunc(func(ctx context.Context, d subscription.Delivery) *retry.Failure {
		if strings.HasPrefix(d.Commit.AggregateID, "bad-") && e.broken.Load() {
			return &retry.Failure{Classes: []string{"Rejected"}, Message: "rejected"}
		}
		e.mu.Lock()
		e.handled = append(e.handled, handledEvent{host, d.Commit.AggregateID, d.Commit.Version})
		e.mu.Unlock()
		return nil
	})
	return subscription.Spec{Name: opsSub, Processor: "Orders", Handler: "on", Start: subscription.StartBeginning,
		Invoker: inv, HandlerRetry: retry.Settings{Unrecoverable: []string{"Rejected"}},
		OnReset: func(ledger.Tx, uint64) error { e.resets.Add(1); return nil }}
}

// ledger returns the ledger host id works on: the one Badger ledger every
// host shares, or its own JetStream Store on the deployment's one stream
// (its own connection and cache, as a host of a deployment has it).
func (e *opsEnv) ledger(id string) ledger.Store {
	e.t.Helper()
	if !e.js {
		return e.st
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := jsledger.Open(ctx, connect(e.t, e.node.URL()), jsledger.Options{Stream: opsDeployment + "_LEDGER",
		Subject: opsDeployment + "_LEDGER.tx", Timeout: 5 * time.Second})
	if err != nil {
		e.t.Fatalf("ledger of %s: %v", id, err)
	}
	e.t.Cleanup(func() { st.Close(context.Background()) })
	return st
}

// engine opens and starts a host's engine over its ledger (returned too);
// it owns nothing until told.
func (e *opsEnv) engine(id string) (*subscription.Engine, ledger.Store) {
	t := e.t
	t.Helper()
	st := e.ledger(id)
	eng, err := subscription.Open(e.log, st, subscription.Options{Host: id, Partitions: partitions,
		CheckpointInterval: 20 * time.Millisecond}, e.spec(id))
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close(context.Background()) })
	return eng, st
}

// host starts a host: its engine, its Cluster and, with forward, its
// Forwarder.
func (e *opsEnv) host(id string, forward bool) *opsHost {
	t := e.t
	t.Helper()
	h := &opsHost{id: id, nc: connect(t, e.node.URL())}
	var st ledger.Store
	h.eng, st = e.engine(id)
	var err error
	h.c, err = Open(t.Context(), h.nc, Options{Host: id, Ledger: st, Engine: h.eng, Subscriptions: []string{opsSub},
		Partitions: partitions, LeaseTTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.c.Close(context.Background()) })
	if forward {
		if h.fwd, err = NewForwarder(h.eng, h.c, h.nc, ForwarderOptions{Deployment: opsDeployment,
			Wait: func() time.Duration { return 2 * time.Second }}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.fwd.Close() })
	}
	return h
}

// hosts starts the hosts named and waits until their engines split the
// partitions, each worked on by one of them.
func (e *opsEnv) hosts(ids ...string) []*opsHost {
	e.t.Helper()
	var hs []*opsHost
	for _, id := range ids {
		hs = append(hs, e.host(id, true))
	}
	e.waitSplit(hs)
	return hs
}

// waitSplit waits until every partition is worked on by the host Assign
// gives it to over hs, and by no other.
func (e *opsEnv) waitSplit(hs []*opsHost) {
	e.t.Helper()
	ids := make([]string, len(hs))
	for i, h := range hs {
		ids[i] = h.id
	}
	want := Assign(opsSub, partitions, ids)
	checkfor.Nil(e.t, 10*time.Second, 20*time.Millisecond, func() error {
		got := make([]string, partitions)
		for _, h := range hs {
			st, err := h.eng.Status(context.Background(), opsSub)
			if err != nil {
				return err
			}
			for _, p := range st.Partitions {
				if p.Fenced || got[p.Index] != "" {
					return fmt.Errorf("partition %d on %s (fenced %v), already on %q", p.Index, h.id, p.Fenced, got[p.Index])
				}
				got[p.Index] = h.id
			}
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("the engines on partitions %q, want %q", got, want)
		}
		return nil
	})
}

// aggregateOn returns an aggregate id with prefix whose partition h works on.
func (e *opsEnv) aggregateOn(h *opsHost, prefix string) string {
	e.t.Helper()
	var owned []int // as the engine has them: the Cluster publishes its view after telling it
	for _, p := range state(e.t, h).Partitions {
		owned = append(owned, p.Index)
	}
	for i := range 1000 {
		id := fmt.Sprintf("%s%d", prefix, i)
		if slices.Contains(owned, eventlog.PartitionOf("Order", id, partitions)) {
			return id
		}
	}
	e.t.Fatalf("%s owns no partition", h.id)
	return ""
}

func (e *opsEnv) append(id string) {
	e.t.Helper()
	if _, err := e.log.Append(context.Background(), eventlog.AppendRequest{AggregateType: "Order", AggregateID: id,
		ExpectedVersion: eventlog.AnyVersion, Events: []eventlog.Event{{Type: "OrderPlaced", Payload: []byte(`{}`)}}}); err != nil {
		e.t.Fatal(err)
	}
}

// handledBy returns the versions of id handled by host, in order.
func (e *opsEnv) handledBy(host, id string) []uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []uint64
	for _, h := range e.handled {
		if h.host == host && h.id == id {
			out = append(out, h.version)
		}
	}
	return out
}

// waitHandled waits until host handled id's versions want, in order.
func (e *opsEnv) waitHandled(host, id string, want ...uint64) {
	e.t.Helper()
	checkfor.Nil(e.t, 10*time.Second, 10*time.Millisecond, func() error {
		if got := e.handledBy(host, id); !slices.Equal(got, want) {
			return fmt.Errorf("%s handled %s %v, want %v", host, id, got, want)
		}
		return nil
	})
}

// parkedOn parks an aggregate of h's at its first event, with a second
// event held behind it, and returns its id.
func (e *opsEnv) parkedOn(h *opsHost) string {
	e.t.Helper()
	id := e.aggregateOn(h, "bad-")
	e.append(id)
	e.waitParked(id)
	e.append(id)
	return id
}

// waitParked waits until id is parked, waiting for an operator.
func (e *opsEnv) waitParked(id string) *ledger.Record {
	e.t.Helper()
	var rec *ledger.Record
	checkfor.Nil(e.t, 10*time.Second, 10*time.Millisecond, func() error {
		err := e.st.View(context.Background(), func(tx ledger.Tx) error {
			var err error
			rec, err = tx.Parked(opsSub, "Order", id)
			return err
		})
		if err == nil && rec.State != ledger.StateWaiting {
			err = fmt.Errorf("%s parked in state %v, want %v", id, rec.State, ledger.StateWaiting)
		}
		return err
	})
	return rec
}

// onEveryLedger runs test on a deployment whose ledger is one Badger
// ledger, and on one whose ledger is on JetStream, as in production.
func onEveryLedger(t *testing.T, test func(t *testing.T, e *opsEnv)) {
	for _, js := range []bool{false, true} {
		t.Run(map[bool]string{false: "badger", true: "jetstream"}[js], func(t *testing.T) {
			test(t, newOpsEnv(t, js))
		})
	}
}

func state(t *testing.T, h *opsHost) subscription.Status {
	t.Helper()
	st, err := h.eng.Status(context.Background(), opsSub)
	if err != nil {
		t.Fatal(err)
	}
	return st
}
