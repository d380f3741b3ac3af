package tracing

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/otlptest"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// TestOffWithoutAnEndpoint: no endpoint, no tracer, and a nil Tracer's
// Flush and Close do nothing.
func TestOffWithoutAnEndpoint(t *testing.T) {
	tr, err := Open(Settings{})
	if err != nil || tr != nil {
		t.Fatalf("Open without an endpoint = %v, %v", tr, err)
	}
	if tr.Flush(context.Background()) != nil || tr.Close(context.Background()) != nil {
		t.Error("a nil Tracer's Flush or Close failed")
	}
}

// TestBadEndpointNamesIt: an endpoint that is not an http(s) URL with a
// host is refused, naming it.
func TestBadEndpointNamesIt(t *testing.T) {
	for _, ep := range []string{"collector:4318", "ftp://x", "http://"} {
		if _, err := Open(Settings{Endpoint: ep}); err == nil || !strings.Contains(err.Error(), ep) {
			t.Errorf("Open(%q) = %v, want an error naming it", ep, err)
		}
	}
}

// TestSpansReachTheCollector sends a span to a real OTLP/HTTP receiver
// and checks it arrives as berth's, with the host's version; a ratio of 0
// sends no root span.
func TestSpansReachTheCollector(t *testing.T) {
	rcv := otlptest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	tr, err := Open(Settings{Endpoint: rcv.URL, SampleRatio: 1, Version: "v9.9.9"})
	if err != nil {
		t.Fatal(err)
	}
	_, span := tr.Start(ctx, "deliver order")
	span.End()
	if err := tr.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	rcv.WaitFor(t, `span "deliver order"`, func(spans []*tracepb.Span) bool {
		return slices.ContainsFunc(spans, func(s *tracepb.Span) bool { return s.GetName() == "deliver order" })
	})
	if svc := rcv.Services(); len(svc) != 1 || svc[0] != "berth" {
		t.Errorf("service names %v, want [berth]", svc)
	}
	if err := tr.Close(ctx); err != nil {
		t.Fatal(err)
	}

	none, err := Open(Settings{Endpoint: rcv.URL, SampleRatio: 0})
	if err != nil {
		t.Fatal(err)
	}
	_, span = none.Start(ctx, "not sampled")
	span.End()
	if err := none.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, s := range rcv.Spans() {
		if s.GetName() == "not sampled" {
			t.Error("a root span was sent at a sample ratio of 0")
		}
	}
}
