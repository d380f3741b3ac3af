package jetstream_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/natstest"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/ledger/jetstream"
	"github.com/berthhq/berth/ledger/ledgertest"
	"github.com/nats-io/nats.go"
)

// connect opens a client connection to urls, closed when the test ends.
func connect(t testing.TB, urls string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(urls, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatalf("connect %s: %v", urls, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// optionsFor names a stream and a subject after name, so that every name
// the suite opens is a ledger of its own, and keeps its cache under name.
func optionsFor(name string, replicas int) jetstream.Options {
	sum := sha256.Sum256([]byte(name))
	h := hex.EncodeToString(sum[:8])
	return jetstream.Options{Stream: "L" + h, Subject: "ledger." + h, Replicas: replicas, Dir: name}
}

func open(t testing.TB, nc *nats.Conn, opts jetstream.Options) *jetstream.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := jetstream.Open(ctx, nc, opts)
	if err != nil {
		t.Fatalf("open %s: %v", opts.Stream, err)
	}
	return s
}

func TestContractSingleNode(t *testing.T) {
	n := natstest.RunServer(t)
	ledgertest.Run(t, func(t *testing.T, name string) ledger.Store {
		return open(t, connect(t, n.URL()), optionsFor(name, 1))
	})
}

func TestContractCluster(t *testing.T) {
	c := natstest.RunCluster(t, 3)
	ledgertest.Run(t, func(t *testing.T, name string) ledger.Store {
		return open(t, connect(t, c.URLs()), optionsFor(name, 3))
	})
}
