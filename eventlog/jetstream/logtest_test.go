package jetstream_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"

	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/eventlog/jetstream"
	"github.com/berthhq/berth/eventlog/logtest"
	"github.com/berthhq/berth/internal/testing/natstest"
	"github.com/nats-io/nats.go"
)

// connect opens a connection to urls that the test closes when it ends.
func connect(t testing.TB, urls string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(urls, nats.MaxReconnects(-1))
	if err != nil {
		t.Fatalf("connect %s: %v", urls, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// optionsFor names the stream and subjects of a log after name, so that
// every test of the suite has a log of its own on the shared servers and
// opening the same name again finds the same log.
func optionsFor(name string, replicas int) jetstream.Options {
	sum := sha256.Sum256([]byte(name))
	id := hex.EncodeToString(sum[:8])
	return jetstream.Options{Stream: "T_" + id, Prefix: "t." + id, Replicas: replicas}
}

// opener returns a logtest.Opener over urls: each log on a connection of its
// own, as another host's would be.
func opener(urls string, replicas int) logtest.Opener {
	return func(t *testing.T, name string) eventlog.Log {
		// The suite opens its logs all at once; creating sixteen replicated
		// streams on two shared cores (and under -race) takes a while.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		l, err := jetstream.Open(ctx, connect(t, urls), optionsFor(name, replicas))
		if err != nil {
			t.Fatalf("open %s: %v", name, err)
		}
		return l
	}
}

func TestContractSingleNode(t *testing.T) {
	srv := natstest.RunServer(t)
	logtest.Run(t, opener(srv.URL(), 1))
}

func TestContractClusterR3(t *testing.T) {
	c := natstest.RunCluster(t, 3)
	logtest.Run(t, opener(c.URLs(), 3))
}
