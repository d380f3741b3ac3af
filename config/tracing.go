package config

import (
	"fmt"

	"github.com/berthhq/berth/internal/tracing"
)

// DefaultTraceSampleRatio is the default tracing.sample-ratio: every delivery traced.
const DefaultTraceSampleRatio = tracing.DefaultSampleRatio

// TracingConfig is [tracing]: OpenTelemetry spans of deliveries and attempts, sent over OTLP/HTTP.
type TracingConfig struct {
	// OTLPEndpoint is the collector's OTLP/HTTP base URL, "http://host:4318" (default empty: tracing
	// off); spans are POSTed to its /v1/traces.
	OTLPEndpoint string `toml:"otlp-endpoint"`
	// SampleRatio is the share of deliveries traced, from 0 to 1 (default 1); a delivery whose
	// appender's trace was sampled follows that decision.
	SampleRatio float64 `toml:"sample-ratio"`
}

// Settings returns the tracer's settings for a host of version.
func (t TracingConfig) Settings(version string) tracing.Settings {
	return tracing.Settings{Endpoint: t.OTLPEndpoint, SampleRatio: t.SampleRatio, Version: version}
}

func (t TracingConfig) validate(p *problems, at keyPath) {
	if t.OTLPEndpoint != "" {
		if err := checkHTTPURL(t.OTLPEndpoint, ""); err != nil {
			p.add(at.key("otlp-endpoint"), fmt.Sprintf("%q", t.OTLPEndpoint), "%v", err)
		}
	}
	if !(t.SampleRatio >= 0 && t.SampleRatio <= 1) {
		p.add(at.key("sample-ratio"), fmt.Sprint(t.SampleRatio), "must be from 0 to 1")
	}
}
