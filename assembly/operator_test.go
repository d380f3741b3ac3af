package assembly

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/berthhq/berth/cluster"
	"github.com/berthhq/berth/config"
	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/internal/testing/natstest"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/subscription"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// TestOpenOperator: a single host's operator calls are its engine's; a
// cluster host's go through a Forwarder on the deployment's subjects, which
// answers on S_OPS.<host> until stopped.
func TestOpenOperator(t *testing.T) {
	log, err := eventlog.Open(t.TempDir(), eventlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close(context.Background())
	st, err := ledger.Open(t.TempDir(), ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close(context.Background())
	eng, err := subscription.Open(log, st, subscription.Options{Host: "h1"})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close(context.Background())
	cfg := func() *config.Config { return config.Default() }

	op, stop, err := openOperator(eng, nil, nil, cfg, nil)
	if err != nil || op != subscription.Operator(eng) || stop() != nil {
		t.Fatalf("single host: %T, %v", op, err)
	}

	nc, err := nats.Connect(natstest.RunServer(t).URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c, err := cluster.Open(t.Context(), nc, cluster.Options{Host: "h1", Ledger: st, Engine: eng})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	op, stop, err = openOperator(eng, c, nc, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := op.(*cluster.Forwarder); !ok {
		t.Fatalf("cluster host: %T", op)
	}
	// Answering where the other hosts call it (an unknown subscription
	// here), until stopped.
	subject := config.Default().Store.JetStream.Stream + "_OPS.h1"
	call := []byte(`{"op":"refresh-pause","subscription":"none","waitMs":1000}`)
	m, err := nc.Request(subject, call, 2*time.Second)
	if err != nil || m.Header.Get(micro.ErrorCodeHeader) != "unknown-subscription" {
		t.Fatalf("a call on %s: %v, %v", subject, err, m)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Request(subject, call, 2*time.Second); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("a call after the stop: %v", err)
	}
}
