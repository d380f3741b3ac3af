package api

import (
	"github.com/berthhq/berth/internal/buildinfo"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics are the host's Prometheus metrics, served at /metrics.
type Metrics struct {
	Registry       *prometheus.Registry
	requests       *prometheus.CounterVec
	eventsAppended prometheus.Counter
}

// NewMetrics registers the API's metrics and the Go runtime's on a new
// registry; other packages add theirs with Registry.MustRegister.
func NewMetrics() *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		Registry: reg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_http_requests_total", Help: "HTTP requests by route and status.",
		}, []string{"route", "code"}),
		eventsAppended: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_events_appended_total", Help: "Events appended through POST /v1/events.",
		}),
	}
	reg.MustRegister(m.requests, m.eventsAppended, buildInfoGauge(buildinfo.Read()),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// buildInfoGauge is berth_build_info, always 1, its labels saying which build
// is running (as `berth version` prints it), so that a dashboard can tell
// hosts of different builds apart and see when a new one was rolled out.
func buildInfoGauge(info buildinfo.Info) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "berth_build_info", Help: "The running build: module version, VCS revision and Go version; always 1.",
		ConstLabels: prometheus.Labels{"version": info.Version, "revision": info.Revision, "goversion": info.GoVersion},
	})
	g.Set(1)
	return g
}
