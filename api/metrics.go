package api

import (
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
	reg.MustRegister(m.requests, m.eventsAppended, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}
