package tests

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/natstest"
)

// The host's /metrics, as an on-call reads it (docs/metrics.md), is checked
// with the ecosystem's own tool: promtool, from Debian's prometheus package
// (.ci/run installs it).

// TestMetricsScrapePassesPromtool: after what exerciseMetrics does (handled
// events, parks, resumes and a skip, webhooks, an unmatched route), the scrape
// of the built host holds each metric with its labels, and `promtool check
// metrics` finds nothing to say of it.
func TestMetricsScrapePassesPromtool(t *testing.T) {
	h := exerciseMetrics(t, "")
	scrape := h.scrape(t)
	promtoolCheckMetrics(t, scrape)
	scrapeHas(t, scrape,
		`berth_handler_attempts_total\{class="none",outcome="success",phase="delivery",subscription="`+subName+`"\} [1-9]`,
		`berth_handler_attempts_total\{class="UnknownBuyer",outcome="unrecoverable",phase="delivery",subscription="`+subName+`"\} 3`,
		// The long-horizon retry that succeeded is a handler call too.
		`berth_handler_attempts_total\{class="none",outcome="success",phase="long-horizon",subscription="`+subName+`"\} 1`,
		`berth_handler_duration_seconds_count\{phase="long-horizon",subscription="`+subName+`"\} 1`,
		`berth_delivery_delay_seconds_count\{phase="long-horizon",subscription="`+subName+`"\} 1`,
		// Outcomes that never happened read 0, from the start.
		`berth_handler_attempts_total\{class="berth.MemoryExceeded",outcome="memory",phase="delivery",subscription="`+subName+`"\} 0`,
		`berth_handler_duration_seconds_count\{phase="delivery",subscription="`+subName+`"\} [1-9]`,
		`berth_delivery_delay_seconds_count\{phase="delivery",subscription="`+subName+`"\} [1-9]`,
		`berth_parks_total\{subscription="`+subName+`"\} 4`,
		`berth_parked_retries_total\{result="success",subscription="`+subName+`"\} 1`,
		`berth_parked_resumes_total\{by="operator",subscription="`+subName+`"\} 1`,
		`berth_parked_resumes_total\{by="berth",subscription="`+subName+`"\} 1`,
		`berth_parked_skips_total\{by="job",subscription="`+subName+`"\} 1`,
		`berth_parked_duration_seconds_count\{subscription="`+subName+`"\} 3`,
		`berth_parked_aggregates\{state="waiting",subscription="`+subName+`"\} 1`,
		`berth_parked_aggregates\{state="resuming",subscription="`+subName+`"\} 0`,
		`berth_parked_aggregates\{state="retrying",subscription="`+subName+`"\} 0`,
		`berth_parked_oldest_first_failure_timestamp_seconds\{subscription="`+subName+`"\} 1\.[0-9]+e\+09`,
		`berth_webhook_deliveries_total\{hook="ops",result="delivered"\} [1-9][0-9]*`,
		`berth_webhook_backlog\{hook="ops"\} 0`,
		`berth_jobs\{state="done"\} 1`,
		`berth_jobs\{state="running"\} 0`,
		`berth_job_items_total\{action="skip",result="done"\} 1`,
		`berth_http_requests_total\{code="404",method="GET",route="unmatched"\} 1`,
		`berth_http_requests_total\{code="201",method="POST",route="/v1/events"\} 5`,
	)
	if t.Failed() {
		t.Logf("scrape:\n%s", scrape)
	}
}

// TestMetricsDashboardAndAlertsNameLiveMetrics: the sample alert rules pass
// `promtool check rules` and their unit tests (docs/alerts_test.yml), and
// every metric that they and the Grafana dashboard name is in the live
// scrape of a host in a cluster (on JetStream, so that the cluster's
// metrics are there too), which promtool also checks; and docs/metrics.md
// documents every Berth metric of that scrape.
func TestMetricsDashboardAndAlertsNameLiveMetrics(t *testing.T) {
	promtool(t, "", "check", "rules", "../docs/alerts.yml")
	promtool(t, "../docs", "test", "rules", "alerts_test.yml")

	srv := natstest.RunServer(t)
	h := exerciseMetrics(t, fmt.Sprintf(`
[store]
backend = "jetstream"

[store.jetstream]
urls = [%q]
stream = "E2E_METRICS"
subject-prefix = "e2e.metrics"
`, srv.URL()))
	checkfor.Within(t, 20*time.Second, func() error {
		if !strings.Contains(h.scrape(t), "berth_cluster_owned_partitions{") {
			return errors.New("no berth_cluster_owned_partitions in the scrape yet")
		}
		return nil
	})
	scrape := h.scrape(t)
	promtoolCheckMetrics(t, scrape)
	live := scrapedNames(scrape)
	// The one host of the cluster owns and claimed every partition.
	scrapeHas(t, scrape,
		`berth_cluster_owned_partitions\{subscription="`+subName+`"\} 16`,
		`berth_cluster_partition_claims_total\{result="claimed"\} (1[6-9]|[2-9][0-9])`,
		`berth_cluster_lease_renew_failures_total 0`,
		`berth_partition_fencings_total\{subscription="`+subName+`"\} 0`,
	)

	alerts, err := os.ReadFile("../docs/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var exprs []string
	for _, line := range strings.Split(string(alerts), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			exprs = append(exprs, line)
		}
	}
	dash, err := os.ReadFile("../docs/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := json.Unmarshal(dash, &doc); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	queries := dashboardQueries(doc)
	if len(queries) < 20 {
		t.Fatalf("the dashboard has %d queries; its panels were not read", len(queries))
	}
	named := metricNames(append(exprs, queries...))
	for _, name := range named {
		if !live[name] {
			t.Errorf("docs name %s, which the live scrape does not have", name)
		}
	}
	if len(named) < 20 {
		t.Errorf("the docs name %d metrics: %v", len(named), named)
	}
	// And every metric of Berth's own in the scrape is documented.
	reference, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	for name := range live {
		if strings.HasPrefix(name, "berth_") && !strings.Contains(string(reference), "`"+strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_count"), "_sum")+"`") {
			t.Errorf("docs/metrics.md does not document %s", name)
		}
	}
}

// metricsRetry retries twice, 100 ms apart, and makes the first
// long-horizon retry a second after the park.
const metricsRetry = `
[subscriptions."ShipmentNotifier.onOrderShipped".retry]
initial-backoff = "100ms"
max-backoff = "100ms"
max-attempts = 2

[subscriptions."ShipmentNotifier.onOrderShipped".parked]
first-delay = "1s"
`

// exerciseMetrics starts a host with extra config and the notifier module,
// and makes it do what each metric counts: a handled order; three parks of
// unknown buyers' orders, one then resumed by an operator (the buyer known
// by then), one skipped by a job, one left parked; a flaky buyer's order
// parked and resumed by its long-horizon retry; webhooks delivered; and a
// request no route matches.
func exerciseMetrics(t *testing.T, extra string) *hostProc {
	t.Helper()
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(receiver.Close)
	svc := newNotifier(t)
	for _, b := range []string{"ghost", "ghost2", "ghost3"} {
		svc.set(b, behaviour{Unknown: true})
	}
	svc.set("flaky", behaviour{Fail: 2})
	h := newHost(t, hostConfig{NotifyURL: svc.URL(), Extra: metricsRetry + extra + fmt.Sprintf(`
[[webhooks]]
name = "ops"
url = %q
`, receiver.URL)})
	h.uploadNotifier(t, 201)
	h.appendShipped(t, "o-ok", "ann")
	h.appendShipped(t, "o-g1", "ghost")
	h.appendShipped(t, "o-g2", "ghost2")
	h.waitParked(t, "o-g1", 20*time.Second)
	h.waitParked(t, "o-g2", 20*time.Second)
	cut := time.Now().UTC() // after o-g2's first failure, before o-g3's
	h.appendShipped(t, "o-g3", "ghost3")
	h.waitParked(t, "o-g3", 20*time.Second)
	r := h.request("POST", "/v1/jobs", map[string]any{"action": "skip", "reason": "not ours",
		"filter": map[string]any{"subscriptions": []string{subName}, "failedAfter": cut}})
	if r.Status != 201 {
		t.Fatalf("the skip job: %s", r)
	}
	// Done before the flaky order parks, so that the job cannot meet it.
	scrapeShows(t, h, 20*time.Second, `berth_jobs{state="done"} 1`) // the skip job done
	h.appendShipped(t, "o-fl", "flaky")
	svc.set("ghost", behaviour{})
	h.must(202, "POST", parkedPath("o-g1")+"/resume", map[string]string{"reason": "buyer imported"})
	h.must(404, "GET", "/v1/no/such/route", nil)
	// The resumes and the skip done, and the webhooks delivered.
	scrapeShows(t, h, 30*time.Second,
		`berth_parked_aggregates{state="resuming",subscription="`+subName+`"} 0`,
		`berth_parked_aggregates{state="retrying",subscription="`+subName+`"} 0`,
		`berth_parked_duration_seconds_count{subscription="`+subName+`"} 3`,
		`berth_webhook_backlog{hook="ops"} 0`)
	return h
}

// scrapeShows waits until h's scrape holds every line of want, and says
// which it lacked when it times out.
func scrapeShows(t *testing.T, h *hostProc, within time.Duration, want ...string) {
	t.Helper()
	checkfor.Within(t, within, func() error {
		s := h.scrape(t)
		for _, w := range want {
			if !strings.Contains(s, w) {
				return fmt.Errorf("the scrape lacks %s", w)
			}
		}
		return nil
	})
}

// scrapeHas fails the test unless the scrape has a line matching each of
// the regular expressions.
func scrapeHas(t testing.TB, scrape string, lines ...string) {
	t.Helper()
	for _, re := range lines {
		if !regexp.MustCompile(`(?m)^` + re + `$`).MatchString(scrape) {
			t.Errorf("the scrape has no line matching %s", re)
		}
	}
}

// scrape reads the host's /metrics.
func (h *hostProc) scrape(t testing.TB) string {
	t.Helper()
	return string(h.must(200, "GET", "/metrics", nil).Body)
}

// promtool runs promtool with args in dir ("": here) and fails the test
// with its output unless it succeeds.
func promtool(t testing.TB, dir string, args ...string) []byte {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool is not installed (apt-get install prometheus; .ci/run does): %v", err)
	}
	cmd := exec.Command(path, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// promtoolCheckMetrics lints a scrape: a warning fails the test as an error
// does.
func promtoolCheckMetrics(t testing.TB, scrape string) {
	t.Helper()
	cmd := exec.Command("promtool", "check", "metrics")
	cmd.Stdin = strings.NewReader(scrape)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil || out.Len() > 0 {
		t.Fatalf("promtool check metrics: %v\n%s", err, out.String())
	}
}

// scrapedNames are the metric names a scrape declares (# TYPE), with a
// histogram's series names.
func scrapedNames(scrape string) map[string]bool {
	names := map[string]bool{}
	for _, line := range strings.Split(scrape, "\n") {
		f := strings.Fields(line)
		if len(f) != 4 || f[0] != "#" || f[1] != "TYPE" {
			continue
		}
		names[f[2]] = true
		if f[3] == "histogram" || f[3] == "summary" {
			names[f[2]+"_count"], names[f[2]+"_sum"] = true, true
			names[f[2]+"_bucket"] = f[3] == "histogram"
		}
	}
	return names
}

// dashboardQueries are a Grafana dashboard's queries: every "expr", and
// every templating variable's query.
func dashboardQueries(v any) []string {
	var out []string
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && (k == "expr" || k == "definition") {
				out = append(out, s)
			}
			out = append(out, dashboardQueries(x)...)
		}
	case []any:
		for _, x := range v {
			out = append(out, dashboardQueries(x)...)
		}
	}
	return out
}

// berthMetric is a name of Berth's own metrics in a query.
var berthMetric = regexp.MustCompile(`\bberth_[a-zA-Z0-9_:]*`)

// metricNames are the Berth metric names the queries hold, sorted, once
// each.
func metricNames(queries []string) []string {
	var out []string
	for _, q := range queries {
		out = append(out, berthMetric.FindAllString(q, -1)...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
