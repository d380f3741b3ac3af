package subscription

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/eventlog/jetstream"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/internal/testing/natstest"
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
	startAcrossOutage(t, node.URL(), node.Shutdown, node.Restart)
}

// startAcrossOutage runs host A over a log on the servers at urls, its
// ledger in Badger: it delivers, down takes the
// log's stream away, Own restarts the run (which fails), the retry fails
// again, up brings the stream back, Status says starting with the read of
// the head that failed, and the next try delivers again.
func startAcrossOutage(t *testing.T, urls string, down, up func()) {
	nc, err := nats.Connect(urls, nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	log, err := jetstream.Open(ctx, nc, jetstream.Options{RequestTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close(context.Background()) })

	const parts = 2
	rec := newRecorder(nil, nil)
	// Each try bounded at 2s: the log's reads, given a deadline, ask NATS
	// again until it, so a try would otherwise last the default 30s.
	opts := Options{Partitions: parts, StartTimeout: 2 * time.Second}
	e := newEnv(t, opts) // its ledger; the log is the one on NATS
	rec.clock = e.clock
	e.events = log
	a := e.host("A", opts, spec(sub, rec))
	own(t, a, e.claim("A", 1, 0, 1))
	appendTo := func(id string) {
		t.Helper()
		// A stream just back may take a moment to take appends.
		checkfor.Nil(t, 30*time.Second, 20*time.Millisecond, func() error {
			_, err := log.Append(ctx, eventlog.AppendRequest{AggregateType: "Order", AggregateID: id,
				ExpectedVersion: eventlog.AnyVersion, Events: []eventlog.Event{{Type: "OrderShipped", Payload: []byte(`{}`)}}})
			return err
		})
	}
	ids := []string{idsIn(0, parts, 1, "p")[0], idsIn(1, parts, 1, "q")[0]}
	for _, id := range ids {
		appendTo(id)
		rec.waitHandled(t, id, 1)
	}

	down()
	own(t, a, e.claim("A", 2, 0, 1)) // the restart's head: no answer from NATS
	e.advance()                      // tried again: still down
	e.blockUntil(1)
	// During the outage the status still answers, at once: starting, with
	// what it could not read.
	asked := time.Now()
	st, err := a.Status(ctx, sub)
	if err != nil || st.State != StateStarting || !strings.Contains(st.Unread, "head") || time.Since(asked) > statusReadTimeout+time.Second {
		t.Fatalf("status during the outage: %+v, %v (after %v), want starting with the head unread", st, err, time.Since(asked))
	}
	t.Logf("during the outage: %s", st.Unread)

	up()
	checkfor.Nil(t, 30*time.Second, 20*time.Millisecond, func() error {
		st, err = a.Status(ctx, sub)
		if err == nil && st.Unread != "" {
			return fmt.Errorf("the log's head not read again: %s", st.Unread)
		}
		return err
	})
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
