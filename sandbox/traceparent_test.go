package sandbox

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// The guest's outbound HTTP carries the W3C traceparent of the span its
// call's context holds (the attempt's), so the service's trace joins; a
// context with no span adds none.
func TestOutboundHTTPCarriesTheAttemptsTraceparent(t *testing.T) {
	s := newSandbox(t, Config{})
	svc := &notificationService{status: 202}
	srv := httptest.NewServer(svc)
	defer srv.Close()
	m := notifierModule(t, s, srv.URL)
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled,
	})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	if o := m.Invoke(ctx, shipped("order-1", "buyer-1", 1), 5*time.Second); o.Kind != Success {
		t.Fatalf("traced call: %v %s", o.Kind, o.Error())
	}
	if o := m.Invoke(context.Background(), shipped("order-2", "buyer-1", 1), 5*time.Second); o.Kind != Success {
		t.Fatalf("untraced call: %v %s", o.Kind, o.Error())
	}
	svc.mu.Lock()
	defer svc.mu.Unlock()
	if len(svc.requests) != 2 {
		t.Fatalf("%d requests, want 2", len(svc.requests))
	}
	if got, want := svc.requests[0].Header.Get("traceparent"), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"; got != want {
		t.Errorf("traced call's traceparent %q, want %q", got, want)
	}
	if got := svc.requests[1].Header.Get("traceparent"); got != "" {
		t.Errorf("untraced call's traceparent %q, want none", got)
	}
}
