// Package tracing makes the host's OpenTelemetry tracer: spans batched and
// sent over OTLP/HTTP to one endpoint ([tracing] otlp-endpoint), sampled at
// a ratio, parent-based so that a sampled appender's trace stays whole.
// With no endpoint there is none: tracing is off by default.
package tracing

import (
	"context"
	"fmt"
	"net/url"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdkresource "go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// DefaultSampleRatio is the default share of deliveries traced: all.
const DefaultSampleRatio = 1.0

// Settings are [tracing]'s keys.
type Settings struct {
	// Endpoint is the OTLP/HTTP collector's base URL, "http://host:4318";
	// spans go to its /v1/traces. Empty: tracing is off.
	Endpoint string
	// SampleRatio is the share of root spans kept, from 0 to 1.
	SampleRatio float64
	// Version is the host's version, the service.version of its spans.
	Version string
}

// Tracer is the host's tracer and what ends it.
type Tracer struct {
	trace.Tracer
	provider *sdktrace.TracerProvider
}

// Open returns the tracer of s, nil when s has no endpoint.
func Open(s Settings) (*Tracer, error) {
	if s.Endpoint == "" {
		return nil, nil
	}
	u, err := url.Parse(s.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("tracing: endpoint %q: want http(s)://host:port", s.Endpoint)
	}
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(u.JoinPath("v1/traces").String())}
	exp, err := otlptracehttp.New(context.Background(), opts...)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	res := sdkresource.NewSchemaless(attribute.String("service.name", "berth"), attribute.String("service.version", s.Version))
	p := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(s.SampleRatio))),
	)
	return &Tracer{Tracer: p.Tracer("github.com/berthhq/berth"), provider: p}, nil
}

// Close sends the spans still batched and stops the exporter; ctx bounds
// how long it waits for the collector. A nil Tracer closes at once.
func (t *Tracer) Close(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.provider.Shutdown(ctx)
}

// Flush sends the spans batched so far.
func (t *Tracer) Flush(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.provider.ForceFlush(ctx)
}
