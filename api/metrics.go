package api

import (
	"net/http"
	"slices"
	"strconv"

	"github.com/berthhq/berth/internal/buildinfo"
	"github.com/berthhq/berth/subscription"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics are the host's Prometheus metrics, served at /metrics.
type Metrics struct {
	Registry       *prometheus.Registry
	requests       *prometheus.CounterVec
	eventsAppended prometheus.Counter
	engine         *engineMetrics // what the engine's Observer is told (engine_metrics.go)
}

// NewMetrics registers the API's metrics and the Go runtime's on a new
// registry; other packages add theirs with Registry.MustRegister.
func NewMetrics() *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		Registry: reg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_http_requests_total", Help: "HTTP requests by method, route (its pattern; \"unmatched\" for none) and status code.",
		}, []string{"method", "route", "code"}),
		eventsAppended: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_events_appended_total", Help: "Events appended through POST /v1/events and POST /v1/events/batch.",
		}),
		engine: newEngineMetrics(),
	}
	reg.MustRegister(m.engine)
	reg.MustRegister(m.requests, m.eventsAppended, buildInfoGauge(buildinfo.Read()),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Observer is what the subscription engine tells of its attempts, parks,
// long-horizon retries and resolutions, counted in these metrics: the
// engine's subscription.Options.Observer (assembly.Options.Observer).
func (m *Metrics) Observer() subscription.Observer { return m.engine }

// requestMethods are the HTTP methods counted by name; any other is
// counted as "other", so that a client cannot grow the label's values.
var requestMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
	http.MethodDelete, http.MethodOptions}

// countRequest counts one request: its route is the pattern it matched
// (never the path, which holds names and ids), "unmatched" for none.
func (m *Metrics) countRequest(method, route string, code int) {
	if !slices.Contains(requestMethods, method) {
		method = "other"
	}
	if route == "" {
		route = "unmatched"
	}
	m.requests.WithLabelValues(method, route, strconv.Itoa(code)).Inc()
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
