package jetstream_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/eventlog/jetstream"
	"github.com/berthhq/berth/internal/testing/natstest"
	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
)

func TestOpenRefuses(t *testing.T) {
	srv := natstest.RunServer(t)
	nc := connect(t, srv.URL())
	js, err := natsjs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// A stream of the name that is not a Berth log, with limits.
	if _, err := js.CreateStream(ctx, natsjs.StreamConfig{Name: "OTHER", Subjects: []string{"other.>"}, MaxAge: time.Hour}); err != nil {
		t.Fatal(err)
	}
	// A Berth log opened once with one prefix.
	l, err := jetstream.Open(ctx, nc, jetstream.Options{Stream: "MINE", Prefix: "mine"})
	if err != nil {
		t.Fatal(err)
	}
	l.Close(ctx)

	tests := []struct {
		name  string
		opts  jetstream.Options
		parts []string // the error names these
	}{
		{"foreign stream", jetstream.Options{Stream: "OTHER", Prefix: "other"}, []string{"OTHER", "incompatible", "not a Berth event log", "max age 1h0m0s", "deletes"}},
		{"other prefix", jetstream.Options{Stream: "MINE", Prefix: "yours"}, []string{"MINE", `subjects ["mine.>"], want ["yours.>"]`}},
		{"other replicas", jetstream.Options{Stream: "MINE", Prefix: "mine", Replicas: 3}, []string{"replicas 1, want 3"}},
		{"replicas 2", jetstream.Options{Replicas: 2}, []string{"replicas is 2, want 1 or 3"}},
		{"dotted stream name", jetstream.Options{Stream: "a.b"}, []string{`stream name "a.b"`}},
		{"wildcard prefix", jetstream.Options{Prefix: "berth.*"}, []string{`subject prefix "berth.*"`}},
		{"empty prefix token", jetstream.Options{Prefix: "berth..events"}, []string{`subject prefix "berth..events"`}},
		{"negative timeout", jetstream.Options{RequestTimeout: -time.Second}, []string{"request timeout -1s"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l, err := jetstream.Open(ctx, nc, tc.opts)
			t.Log(err)
			if err == nil {
				l.Close(ctx)
				t.Fatal("Open succeeded")
			}
			for _, p := range tc.parts {
				if !strings.Contains(err.Error(), p) {
					t.Errorf("error %q does not name %q", err, p)
				}
			}
		})
	}
	// Nothing was changed by the refusals: the log opens as it was made.
	if l, err := jetstream.Open(ctx, nc, jetstream.Options{Stream: "MINE", Prefix: "mine"}); err != nil {
		t.Fatalf("reopen: %v", err)
	} else {
		l.Close(ctx)
	}
}

// A lost NATS connection gives errors naming it, within the request
// timeout, instead of hangs: while the server is down (reconnecting), and
// once the connection is closed for good.
func TestLostConnection(t *testing.T) {
	srv := natstest.RunServer(t)
	nc := connect(t, srv.URL())
	ctx := context.Background()
	const timeout = 300 * time.Millisecond
	l, err := jetstream.Open(ctx, nc, jetstream.Options{RequestTimeout: timeout, PublishAttempts: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(ctx)
	mustAppend(t, l, req("order", "o-1", 0))

	srv.Shutdown()
	calls := func() map[string]error {
		errs := map[string]error{}
		_, errs["Append"] = l.Append(ctx, req("order", "o-1", 1))
		_, errs["Read"] = l.Read(ctx, 1, 0)
		_, errs["ReadAggregate"] = l.ReadAggregate(ctx, "order", "o-1", 0, 0)
		_, errs["Head"] = l.Head(ctx)
		_, errs["Version"] = l.Version(ctx, "order", "o-1")
		return errs
	}
	start := time.Now()
	for name, err := range calls() {
		t.Logf("%s with the server down: %v", name, err)
		if err == nil || !strings.Contains(err.Error(), "eventlog/jetstream") ||
			!strings.Contains(err.Error(), "NATS") {
			t.Errorf("%s with the server down: %v, want an error naming NATS", name, err)
		}
	}
	// Five calls, Append with two attempts: each bounded by the timeout.
	if took := time.Since(start); took > 6*timeout+2*time.Second {
		t.Errorf("the calls took %v with a request timeout of %v", took, timeout)
	}

	wait := make(chan error, 1)
	go func() { wait <- l.Wait(ctx, 5) }()
	nc.Close()
	select {
	case err := <-wait:
		if err == nil || !strings.Contains(err.Error(), "connection is closed") {
			t.Fatalf("Wait across the connection's close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not return when the connection closed")
	}
	for name, err := range calls() {
		if !errors.Is(err, nats.ErrConnectionClosed) || !strings.Contains(err.Error(), "connection is closed") {
			t.Errorf("%s on a closed connection: %v", name, err)
		}
	}
	if err := l.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := l.Head(ctx); !errors.Is(err, eventlog.ErrClosed) {
		t.Fatalf("Head after Close: %v", err)
	}
}
