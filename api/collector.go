package api

import (
	"context"
	"time"

	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/subscription"
	"github.com/prometheus/client_golang/prometheus"
)

// engineCollector reports the subscriptions' state at scrape time, so the
// figures are never stale and the engine keeps no metric state of its own.
type engineCollector struct {
	engine *subscription.Engine
	ledger ledger.Store // read for the oldest parked record; nil: not reported

	lag, checkpoint, head, parked, oldest, groups, paused, systemic, concurrency, fencings, startFailures *prometheus.Desc
}

func newEngineCollector(e *subscription.Engine, l ledger.Store) *engineCollector {
	sub := []string{"subscription"}
	return &engineCollector{
		engine: e,
		ledger: l,
		oldest: prometheus.NewDesc("berth_parked_oldest_first_failure_timestamp_seconds",
			"First failure of the subscription's oldest parked record (retrying or waiting), in Unix seconds; absent when none is parked.", sub, nil),
		groups: prometheus.NewDesc("berth_parked_groups",
			"Failure groups of the subscription's parked records: the causes they parked for.", sub, nil),
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
	for _, d := range []*prometheus.Desc{c.lag, c.checkpoint, c.head, c.parked, c.oldest, c.groups, c.paused, c.systemic, c.concurrency, c.fencings, c.startFailures} {
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
			// Every state, 0 included: a state that empties reads 0, not
			// a series that vanishes (and an alert that cannot resolve).
			for _, state := range parkedStates {
				ch <- prometheus.MustNewConstMetric(c.parked, prometheus.GaugeValue, float64(st.Parked[state]), name, string(state))
			}
			if st.Parked[ledger.StateRetrying]+st.Parked[ledger.StateWaiting] > 0 {
				c.collectOldest(ctx, ch, name)
			}
			c.collectGroups(ctx, ch, name)
		}
		paused := 0.0
		if st.State == subscription.StatePaused {
			paused = 1
		}
		ch <- prometheus.MustNewConstMetric(c.paused, prometheus.GaugeValue, paused, name)
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

// parkedStates are the states berth_parked_aggregates reports, every one.
var parkedStates = []ledger.State{ledger.StateRetrying, ledger.StateWaiting, ledger.StateResuming}

// collectGroups reports how many failure groups sub's parked records
// make, 0 included, from the ledger's group heads.
func (c *engineCollector) collectGroups(ctx context.Context, ch chan<- prometheus.Metric, sub string) {
	if c.ledger == nil {
		return
	}
	var n int
	err := c.ledger.View(ctx, func(tx ledger.Tx) (err error) {
		n, err = tx.CountGroups(sub)
		return err
	})
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.groups, prometheus.GaugeValue, float64(n), sub)
}

// collectOldest reports the first failure of sub's oldest parked record
// that is retrying or waiting, from the ledger's index of first failures.
func (c *engineCollector) collectOldest(ctx context.Context, ch chan<- prometheus.Metric, sub string) {
	if c.ledger == nil {
		return
	}
	var (
		oldest time.Time
		ok     bool
	)
	err := c.ledger.View(ctx, func(tx ledger.Tx) (err error) {
		oldest, ok, err = tx.OldestParked(sub)
		return err
	})
	if err != nil || !ok {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, float64(oldest.UnixNano())/1e9, sub)
}
