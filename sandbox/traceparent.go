package sandbox

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/propagation"
)

// injectTraceparent sets the W3C traceparent (and tracestate) of the span
// the call's context carries, the attempt's, on an outbound request, so
// that the service called joins the delivery's trace. A traceparent the
// guest set itself is kept; with tracing off the context carries no span
// and nothing is set.
func injectTraceparent(ctx context.Context, h http.Header) {
	if h.Get("traceparent") != "" {
		return
	}
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(h))
}
