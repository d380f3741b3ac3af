package api

import (
	"context"
	"time"

	"github.com/berthhq/berth/subscription"
	"github.com/prometheus/client_golang/prometheus"
)

// engineCollector reports the subscriptions' state at scrape time, so the
// figures are never stale and the engine keeps no metric state of its own.
type engineCollector struct {
	engine *subscription.Engine

	lag, checkpoint, head, parked, paused, systemic, concurrency, fencings, startFailures *prometheus.Desc
}

func newEngineCollector(e *subscription.Engine) *engineCollector {
	sub := []string{"subscription"}
	return &engineCollector{
		engine:      e,
		lag:         prometheus.NewDesc("berth_subscription_lag", "Commits at or after the subscription's checkpoint.", sub, nil),
		checkpoint:  prometheus.NewDesc("berth_subscription_checkpoint", "The subscription's checkpoint position.", sub, nil),
		head:        prometheus.NewDesc("berth_eventlog_head", "Position of the last commit in the event log.", nil, nil),
		parked:      prometheus.NewDesc("berth_parked_aggregates", "Parked aggregates by subscription and state.", []string{"subscription", "state"}, nil),
		paused:      prometheus.NewDesc("berth_subscription_paused", "1 while an operator has paused the subscription.", sub, nil),
		systemic:    prometheus.NewDesc("berth_partitions_systemic_paused", "Partitions paused by a systemic failure.", sub, nil),
		concurrency: prometheus.NewDesc("berth_partition_concurrency_lowered", "Partitions whose concurrency backpressure has lowered.", sub, nil),
		fencings: prometheus.NewDesc("berth_partition_fencings_total",
			"Partitions this host lost to fencing since it started: another host claimed them, and this one stopped at its next write.", sub, nil),
		startFailures: prometheus.NewDesc("berth_subscription_start_failures_total",
			"Failed tries to start the subscription's run (its event log or ledger away); each is tried again until one works.", sub, nil),
	}
}

// Describe sends the descriptors.
func (c *engineCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.lag, c.checkpoint, c.head, c.parked, c.paused, c.systemic, c.concurrency, c.fencings, c.startFailures} {
		ch <- d
	}
}

// Collect reads every subscription's status.
func (c *engineCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var head uint64
	for _, name := range c.engine.Subscriptions() {
		st, err := c.engine.Status(ctx, name)
		if err != nil {
			continue
		}
		// During an outage the head, lag and parked counts are not known:
		// they are left out of the scrape rather than shown as 0.
		if st.Unread == "" {
			head = max(head, st.Head)
			ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, float64(st.Lag), name)
			ch <- prometheus.MustNewConstMetric(c.checkpoint, prometheus.GaugeValue, float64(st.Checkpoint), name)
		}
		paused := 0.0
		if st.State == subscription.StatePaused {
			paused = 1
		}
		ch <- prometheus.MustNewConstMetric(c.paused, prometheus.GaugeValue, paused, name)
		for state, n := range st.Parked {
			ch <- prometheus.MustNewConstMetric(c.parked, prometheus.GaugeValue, float64(n), name, string(state))
		}
		systemic, lowered := 0, 0
		for _, p := range st.Partitions {
			if p.State == subscription.StateSystemicPaused {
				systemic++
			}
			if p.Concurrency < p.MaxConcurrency {
				lowered++
			}
		}
		ch <- prometheus.MustNewConstMetric(c.systemic, prometheus.GaugeValue, float64(systemic), name)
		ch <- prometheus.MustNewConstMetric(c.concurrency, prometheus.GaugeValue, float64(lowered), name)
		ch <- prometheus.MustNewConstMetric(c.fencings, prometheus.CounterValue, float64(st.Fencings), name)
		ch <- prometheus.MustNewConstMetric(c.startFailures, prometheus.CounterValue, float64(st.StartFailures), name)
	}
	ch <- prometheus.MustNewConstMetric(c.head, prometheus.GaugeValue, float64(head))
}
