package api

import (
	"context"
	"time"

	"github.com/berthhq/berth/jobs"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/webhook"
	"github.com/prometheus/client_golang/prometheus"
)

// partsCollector reports, at scrape time, the counters and backlogs the
// host's other parts keep: the webhooks' deliveries and outbox, the jobs,
// and this host's place in a cluster. Each part is optional (nil: its
// metrics are absent).
type partsCollector struct {
	hooks   *webhook.Dispatcher
	jobs    *jobs.Runner
	cluster ClusterView

	deliveries, backlog, jobStates, jobItems, owned, claims, renewFailures, leasesLost *prometheus.Desc
	leaseValid, staleReads, reconnects, holdDowns                                      *prometheus.Desc
}

// owner is what the collector reads of a cluster beside ClusterView: the
// partitions this host owns (*cluster.Cluster has it).
type owner interface {
	Owned() map[string]map[int]uint64
}

func newPartsCollector(d Deps) *partsCollector {
	return &partsCollector{
		hooks: d.Hooks, jobs: d.Jobs, cluster: d.Cluster,
		deliveries: prometheus.NewDesc("berth_webhook_deliveries_total",
			"Webhook delivery attempts by hook and result: delivered (2xx), failed (an error or another status; tried again), dropped (given up after its attempts).",
			[]string{"hook", "result"}, nil),
		backlog: prometheus.NewDesc("berth_webhook_backlog",
			"Outbox notifications the hook wants and has not delivered yet, the one in flight included (on the host that delivers webhooks).",
			[]string{"hook"}, nil),
		jobStates: prometheus.NewDesc("berth_jobs", "Bulk resume and skip jobs stored, by state (every state, 0 included).", []string{"state"}, nil),
		jobItems: prometheus.NewDesc("berth_job_items_total",
			"Parked records this host's jobs acted on, by action and result: done (resumed or skipped), gone (no longer parked), failed.",
			[]string{"action", "result"}, nil),
		owned: prometheus.NewDesc("berth_cluster_owned_partitions", "Partitions of the subscription this host owns.", []string{"subscription"}, nil),
		claims: prometheus.NewDesc("berth_cluster_partition_claims_total",
			"Partition claims this host wrote in the ledger by result: claimed, or conflict (another host's claim won).", []string{"result"}, nil),
		renewFailures: prometheus.NewDesc("berth_cluster_lease_renew_failures_total",
			"Failed writes of this host's membership lease (network, server); each is tried again.", nil, nil),
		leasesLost: prometheus.NewDesc("berth_cluster_leases_lost_total",
			"Times this host found its membership lease expired or replaced.", nil, nil),
		leaseValid: prometheus.NewDesc("berth_cluster_lease_valid",
			"1 while this host's membership lease lets it act; 0 while it calls no handler (its lease may have run out).", nil, nil),
		staleReads: prometheus.NewDesc("berth_cluster_lease_stale_reads_total",
			"Lease renewals not taken as confirmed because a NATS node behind the majority answered the read-back.", nil, nil),
		reconnects: prometheus.NewDesc("berth_cluster_nats_reconnects_total",
			"Times this host moved its NATS connection to another server because lease renewals kept failing.", nil, nil),
		holdDowns: prometheus.NewDesc("berth_cluster_lease_hold_downs_total",
			"Times this host stayed out of the deployment after its lease terms ended more than three times in a minute (a flapping link).", nil, nil),
	}
}

// Describe sends the descriptors.
func (c *partsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.deliveries, c.backlog, c.jobStates, c.jobItems, c.owned, c.claims, c.renewFailures, c.leasesLost,
		c.leaseValid, c.staleReads, c.reconnects, c.holdDowns} {
		ch <- d
	}
}

// Collect reads each part.
func (c *partsCollector) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v int, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
	}
	if c.hooks != nil {
		for _, h := range c.hooks.Stats() {
			counter(c.deliveries, h.Delivered, h.Name, "delivered")
			counter(c.deliveries, h.FailedAttempts, h.Name, "failed")
			counter(c.deliveries, h.Dropped, h.Name, "dropped")
			if h.Pending >= 0 { // -1: the outbox could not be read
				gauge(c.backlog, h.Pending, h.Name)
			}
		}
	}
	if c.jobs != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		states, err := c.jobs.States(ctx)
		cancel()
		if err == nil {
			for _, s := range []ledger.JobState{ledger.JobRunning, ledger.JobDone, ledger.JobCancelled} {
				gauge(c.jobStates, states[s], string(s))
			}
		}
		for _, action := range []string{ledger.JobResume, ledger.JobSkip} {
			it := c.jobs.Items(action)
			counter(c.jobItems, it.Done, action, "done")
			counter(c.jobItems, it.Gone, action, "gone")
			counter(c.jobItems, it.Failed, action, "failed")
		}
	}
	if c.cluster == nil {
		return
	}
	if o, ok := c.cluster.(owner); ok {
		for sub, parts := range o.Owned() {
			gauge(c.owned, len(parts), sub)
		}
	}
	st := c.cluster.Stats()
	counter(c.claims, st.Claims, "claimed")
	counter(c.claims, st.ClaimConflicts, "conflict")
	counter(c.renewFailures, st.RenewalFailures)
	counter(c.leasesLost, st.LeasesLost)
	counter(c.staleReads, st.StaleReads)
	counter(c.reconnects, st.Reconnects)
	counter(c.holdDowns, st.HoldDowns)
	if l, ok := c.cluster.(leaseHolder); ok {
		valid := 0
		if l.LeaseValid() {
			valid = 1
		}
		gauge(c.leaseValid, valid)
	}
}
