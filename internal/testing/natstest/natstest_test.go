package natstest

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/jsapi"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// streamRoundTrip creates a stream with replicas and publishes and reads one
// message on it.
func streamRoundTrip(t *testing.T, urls string, replicas int) {
	t.Helper()
	nc, err := nats.Connect(urls)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}, Replicas: replicas})
	if err != nil {
		t.Fatalf("create stream R%d: %v", replicas, err)
	}
	// Asked again while the new stream elects its leader ("no response
	// from stream"); the message id keeps a retried publish from storing twice.
	ack, err := jsapi.Ask(ctx, jsapi.RequestTimeout, func(ctx context.Context) (*jetstream.PubAck, error) {
		return js.Publish(ctx, "t.a", []byte("hello"), jetstream.WithMsgID("hello"))
	})
	if err != nil || ack.Sequence != 1 {
		t.Fatalf("publish: %v, %+v", err, ack)
	}
	m, err := s.GetMsg(ctx, 1)
	if err != nil || string(m.Data) != "hello" {
		t.Fatalf("get: %v, %q", err, m.Data)
	}
}

func TestRunServer(t *testing.T) {
	n := RunServer(t)
	streamRoundTrip(t, n.URL(), 1)
	n.Shutdown()
	n.Restart()
	nc, err := nats.Connect(n.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	s, err := js.Stream(t.Context(), "T")
	if err != nil {
		t.Fatalf("the stream did not survive a restart: %v", err)
	}
	if m, err := s.GetMsg(t.Context(), 1); err != nil || string(m.Data) != "hello" {
		t.Fatalf("after restart: %v", err)
	}
}

func TestRunCluster(t *testing.T) {
	c := RunCluster(t, 3)
	streamRoundTrip(t, c.URLs(), 3)
	// A node down: the R3 stream still takes writes.
	c.Nodes[0].Shutdown()
	c.WaitForMetaLeader(t)
	nc, err := nats.Connect(c.URLs(), nats.Timeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	checkfor.Nil(t, 20*time.Second, 50*time.Millisecond, func() error {
		_, err := js.Publish(t.Context(), "t.b", []byte("still"))
		return err
	})
	c.Nodes[0].Restart()
	c.WaitForMetaLeader(t)
}

// SyncAlways reaches every node's JetStream (the setting a config file's
// sync_interval: always gives), and a node without it keeps NATS's default.
func TestSyncAlways(t *testing.T) {
	c := RunClusterWith(t, 3, SyncAlways)
	for _, n := range c.Nodes {
		if cfg := n.Server().JetStreamConfig(); cfg == nil || !cfg.SyncAlways {
			t.Fatalf("%s: JetStream config %+v; want sync always", n.Name(), cfg)
		}
	}
	streamRoundTrip(t, c.URLs(), 3)
	one := RunServerWith(t, SyncAlways)
	if cfg := one.Server().JetStreamConfig(); !cfg.SyncAlways {
		t.Fatalf("RunServerWith(SyncAlways): %+v", cfg)
	}
	if cfg := RunServer(t).Server().JetStreamConfig(); cfg.SyncAlways || cfg.SyncInterval != 2*time.Minute {
		t.Fatalf("default server: sync always %v, interval %v; want NATS's default (2m)", cfg.SyncAlways, cfg.SyncInterval)
	}
}

// TestPortTakenFailsAtOnce: a node whose port another process took since it
// was chosen fails its start at once with errPortTaken (RunClusterWith then
// chooses again), rather than wait readyTimeout for a listener that never
// comes.
func TestPortTakenFailsAtOnce(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	n := &Node{t: t, opts: baseOptions(t, "n1")}
	n.opts.Port = l.Addr().(*net.TCPAddr).Port
	start := time.Now()
	if err := n.launch(); !errors.Is(err, errPortTaken) {
		t.Fatalf("launch on a taken port: %v, want errPortTaken", err)
	}
	if d := time.Since(start); d >= readyTimeout {
		t.Errorf("the taken port was told after %v", d)
	}
}
