package subscription

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/eventlog/jetstream"
	"github.com/berthhq/berth/internal/checkfor"
	"github.com/berthhq/berth/internal/natstest"
	"github.com/nats-io/nats.go"
)

// Issue 19's stop for good, on a real NATS server: host A's lease term
// changes (Own, at a new epoch) while the server holding the event log's
// stream is down, so the restart's read of the head gets no answer from
// NATS. The subscription is left starting, not stopped; its start is tried
// again on the engine's clock, fails again while the server is down, and
// once the server is back the next try starts the run and delivery goes on
// from the checkpoints — with no Own or restart from outside.
func TestStartTriedAgainUntilNATSIsBack(t *testing.T) {
	node := natstest.RunServer(t)
	nc, err := nats.Connect(node.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	log, err := jetstream.Open(ctx, nc, jetstream.Options{RequestTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close(context.Background()) })

	const parts = 2
	rec := newRecorder(nil, nil)
	opts := Options{Partitions: parts}
	e := newEnv(t, opts) // its ledger; the log is the one on NATS
	rec.clock = e.clock
	e.events = log
	a := e.host("A", opts, spec(sub, rec))
	own(t, a, e.claim("A", 1, 0, 1))
	appendTo := func(id string) {
		t.Helper()
		if _, err := log.Append(ctx, eventlog.AppendRequest{AggregateType: "Order", AggregateID: id,
			ExpectedVersion: eventlog.AnyVersion, Events: []eventlog.Event{{Type: "OrderShipped", Payload: []byte(`{}`)}}}); err != nil {
			t.Fatal(err)
		}
	}
	ids := []string{idsIn(0, parts, 1, "p")[0], idsIn(1, parts, 1, "q")[0]}
	for _, id := range ids {
		appendTo(id)
		rec.waitHandled(t, id, 1)
	}

	node.Shutdown()
	own(t, a, e.claim("A", 2, 0, 1)) // the restart's head: no answer from NATS
	e.advance()                      // tried again: still down
	e.blockUntil(1)

	node.Restart()
	checkfor.Cond(t, 30*time.Second, 10*time.Millisecond, "the connection back", func() bool { return nc.Status() == nats.CONNECTED })
	st, err := a.Status(ctx, sub)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != StateStarting || st.StartFailures != 2 || !strings.Contains(st.StartError, "head on stream") {
		t.Fatalf("status %+v, want starting after 2 failed reads of the head", st)
	}
	t.Logf("starting: %s", st.StartError)
	for _, id := range ids {
		appendTo(id)
	}
	e.advance() // the try after NATS is back
	for _, id := range ids {
		rec.waitHandled(t, id, 2)
	}
	st = e.waitIdleOf(a, sub)
	if st.State != StateRunning || st.StartError != "" || len(st.Partitions) != parts {
		t.Fatalf("status %+v, want running both partitions", st)
	}
	for _, p := range st.Partitions {
		if p.Epoch != 2 {
			t.Fatalf("partition %+v, want epoch 2", p)
		}
	}
}
