package api

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// appendTraceparent returns the W3C traceparent an appender sent with its
// events, normalised, to be kept with the commit so that the delivery's
// trace continues the append's; "" when there is none or it is not valid
// (the W3C rule: an invalid one is ignored, not refused).
func appendTraceparent(h http.Header) string {
	if h.Get("traceparent") == "" {
		return ""
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.HeaderCarrier(h))
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	out := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, out)
	return out["traceparent"]
}
