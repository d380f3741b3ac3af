package api

import (
	"github.com/berthhq/berth/subscription"
	"github.com/prometheus/client_golang/prometheus"
)

// engineMetrics counts what the subscription engine tells its Observer:
// attempts by outcome, parks, long-horizon retries, resumes and skips, and
// the durations of handler calls, of delivery and of parks. Every label is
// bounded: subscriptions are configured, outcomes and actors fixed, and a
// class is one the module declares or a builtin (else "other").
type engineMetrics struct {
	attempts, parks, retries, resumes, skips *prometheus.CounterVec
	duration, delay, parked                  *prometheus.HistogramVec
}

// Buckets of the engine's histograms, in seconds: a handler's call (its
// timeout defaults to 30 s), the delay from append to handled (retries and
// parks make it hours), the time a record stays parked (days).
var (
	handlerBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}
	delayBuckets   = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 4 * 3600, 24 * 3600}
	parkedBuckets  = []float64{60, 300, 900, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 24 * 3600, 2 * 24 * 3600, 7 * 24 * 3600}
)

func newEngineMetrics() *engineMetrics {
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, append([]string{"subscription"}, labels...))
	}
	histogram := func(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, append([]string{"subscription"}, labels...))
	}
	return &engineMetrics{
		attempts: counter("berth_handler_attempts_total",
			"Handler calls at an event by phase (delivery: live delivery, its retry budget, outage probes and replays after a resume; long-horizon: a parked aggregate's long-horizon retry), outcome (success, recoverable, unrecoverable, timeout, trap, memory, systemic, backpressure, canceled) and the failure's class: declared by the module, builtin or in the handler's lists, \"other\" for any other, \"none\" for no class.",
			"phase", "outcome", "class"),
		parks: counter("berth_parks_total", "Aggregates parked: their retry budget spent, or an unrecoverable failure."),
		retries: counter("berth_parked_retries_total",
			"Long-horizon retries of parked aggregates by result (success resumes the aggregate, failure keeps it parked).", "result"),
		resumes: counter("berth_parked_resumes_total",
			"Parked aggregates resumed, by whom: operator, job (an operator's bulk job) or berth (a long-horizon retry that succeeded, or a park an outage made, taken back).", "by"),
		skips: counter("berth_parked_skips_total", "Parked aggregates skipped past the events they held back, by whom: operator or job.", "by"),
		duration: histogram("berth_handler_duration_seconds",
			"Duration of a handler's call, every attempt berth_handler_attempts_total counts, by phase (delivery, long-horizon).", handlerBuckets, "phase"),
		delay: histogram("berth_delivery_delay_seconds",
			"Time from an event's append to its handler's success (retries, pauses and parks included), by the phase of the attempt that succeeded (delivery, long-horizon).", delayBuckets, "phase"),
		parked: histogram("berth_parked_duration_seconds",
			"Time from a parked record's first failure until it was resumed or skipped.", parkedBuckets),
	}
}

func (m *engineMetrics) all() []prometheus.Collector {
	return []prometheus.Collector{m.attempts, m.parks, m.retries, m.resumes, m.skips, m.duration, m.delay, m.parked}
}

// Describe sends every descriptor.
func (m *engineMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.all() {
		c.Describe(ch)
	}
}

// Collect sends every metric.
func (m *engineMetrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.all() {
		c.Collect(ch)
	}
}

// phase is an attempt's phase label.
func phase(a *subscription.Attempt) string {
	if a.LongHorizon {
		return "long-horizon"
	}
	return "delivery"
}

// Started makes the series of every known label set of a subscription's
// attempts, at 0 (Prometheus's advice: rate() cannot see the increment
// that makes a series appear).
func (m *engineMetrics) Started(sub string, known []subscription.Attempt) {
	for i := range known {
		a := &known[i]
		m.attempts.WithLabelValues(sub, phase(a), a.Outcome, a.Class)
		m.duration.WithLabelValues(sub, phase(a))
		m.delay.WithLabelValues(sub, phase(a))
	}
}

// Attempted counts one attempt, its duration, and for a success the delay
// from the event's append.
func (m *engineMetrics) Attempted(a subscription.Attempt) {
	ph := phase(&a)
	m.attempts.WithLabelValues(a.Subscription, ph, a.Outcome, a.Class).Inc()
	m.duration.WithLabelValues(a.Subscription, ph).Observe(a.Duration.Seconds())
	if a.Outcome == "success" && !a.Appended.IsZero() {
		m.delay.WithLabelValues(a.Subscription, ph).Observe(max(a.Ended.Sub(a.Appended).Seconds(), 0))
	}
}

// Parked counts a park.
func (m *engineMetrics) Parked(sub string) { m.parks.WithLabelValues(sub).Inc() }

// Retried counts a long-horizon retry.
func (m *engineMetrics) Retried(sub string, handled bool) {
	result := "failure"
	if handled {
		result = "success"
	}
	m.retries.WithLabelValues(sub, result).Inc()
}

// Resolved counts a resume or skip and the time the record was parked.
func (m *engineMetrics) Resolved(r subscription.Resolution) {
	if r.Action == "skip" {
		m.skips.WithLabelValues(r.Subscription, r.By).Inc()
	} else {
		m.resumes.WithLabelValues(r.Subscription, r.By).Inc()
	}
	m.parked.WithLabelValues(r.Subscription).Observe(max(r.Parked.Seconds(), 0))
}
