package api

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/api/wire"
	"github.com/berthhq/berth/internal/testing/checkfor"
)

// TestModuleLifecycle: a bad upload stores nothing; PUT is 201 then 200;
// GET shows the module; DELETE is 204 then 404.
func TestModuleLifecycle(t *testing.T) {
	t.Parallel()
	h := newHost(t, "")
	list := func() []wire.ModuleInfo {
		t.Helper()
		r := h.do(req{method: "GET", path: "/v1/modules"})
		var out struct{ Modules []wire.ModuleInfo }
		r.json(t, &out)
		return out.Modules
	}
	if got := list(); len(got) != 0 {
		t.Fatalf("modules at start: %+v", got)
	}
	problemOf(t, h.do(req{method: "PUT", path: "/v1/modules/shipment-notifier", body: "\x00asm\x01\x00\x00\x00garbage", contentType: "application/wasm"}), http.StatusBadRequest)
	if got := list(); len(got) != 0 {
		t.Fatalf("modules after a bad upload: %+v", got)
	}

	r := h.upload("shipment-notifier", "")
	if r.status != http.StatusCreated || r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("first upload: %s (%s)", r, r.header.Get("Content-Type"))
	}
	var info wire.ModuleInfo
	r.json(t, &info)
	if info.Name != "shipment-notifier" || len(info.SHA256) != 64 || info.Processor != "ShipmentNotifier" || info.Kind == "" ||
		!slices.Equal(info.Subscriptions, []string{notifierSub}) || len(info.Handlers) != 1 ||
		info.Handlers[0].Name != "onOrderShipped" || !slices.Equal(info.Handlers[0].EventTypes, []string{"OrderShipped"}) {
		t.Errorf("module info %+v", info)
	}
	if r := h.upload("shipment-notifier", ""); r.status != http.StatusOK {
		t.Fatalf("second upload: %s", r)
	}
	// Another module serving the same processor is refused.
	problemOf(t, h.upload("other", ""), http.StatusConflict)
	if got := list(); len(got) != 1 || got[0].Name != "shipment-notifier" {
		t.Fatalf("modules: %+v", got)
	}
	var one wire.ModuleInfo
	h.do(req{method: "GET", path: "/v1/modules/shipment-notifier"}).json(t, &one)
	if one.SHA256 != info.SHA256 {
		t.Errorf("GET module: %+v", one)
	}

	// A kept version's bytes, as uploaded, for a replay; the ETag is their sha256.
	w := h.do(req{method: "GET", path: "/v1/modules/shipment-notifier/versions/1/wasm"})
	if sum := sha256.Sum256(w.body); w.status != http.StatusOK || w.header.Get("Content-Type") != "application/wasm" ||
		hex.EncodeToString(sum[:]) != info.SHA256 || w.header.Get("ETag") != `"`+info.SHA256+`"` {
		t.Errorf("version bytes: %d %s, %d bytes, ETag %s", w.status, w.header.Get("Content-Type"), len(w.body), w.header.Get("ETag"))
	}
	problemOf(t, h.do(req{method: "GET", path: "/v1/modules/shipment-notifier/versions/9/wasm"}), http.StatusNotFound)
	problemOf(t, h.do(req{method: "GET", path: "/v1/modules/shipment-notifier/versions/v1/wasm"}), http.StatusBadRequest)

	if r := h.do(req{method: "DELETE", path: "/v1/modules/shipment-notifier"}); r.status != http.StatusNoContent || len(r.body) != 0 {
		t.Fatalf("delete: %s", r)
	}
	problemOf(t, h.do(req{method: "DELETE", path: "/v1/modules/shipment-notifier"}), http.StatusNotFound)
	problemOf(t, h.do(req{method: "GET", path: "/v1/modules/shipment-notifier"}), http.StatusNotFound)
	if got := list(); len(got) != 0 {
		t.Fatalf("modules after delete: %+v", got)
	}
}

// TestEvents appends commits and reads them back by aggregate.
func TestEvents(t *testing.T) {
	t.Parallel()
	h := newHost(t, "")
	r := h.do(req{method: "POST", path: "/v1/events", body: `{"aggregateType":"Order","aggregateId":"o-1","expectedVersion":0,"ownerId":"b-1","events":[{"type":"OrderPlaced","data":{"n":1}},{"type":"OrderPaid"}]}`})
	if r.status != http.StatusCreated {
		t.Fatalf("append: %s", r)
	}
	var appended struct {
		AggregateType, AggregateID string
		Version, Position          uint64
	}
	r.json(t, &appended)
	if appended.AggregateType != "Order" || appended.AggregateID != "o-1" || appended.Version != 1 || appended.Position != 1 {
		t.Errorf("append answered %+v", appended)
	}
	if r := h.do(req{method: "POST", path: "/v1/events", body: `{"aggregateType":"Order","aggregateId":"o-1","expectedVersion":1,"events":[{"type":"OrderShipped","data":{"carrier":"DHL"}}]}`}); r.status != http.StatusCreated {
		t.Fatalf("second append: %s", r)
	}
	problemOf(t, h.do(req{method: "POST", path: "/v1/events", body: `{"aggregateType":"Order","aggregateId":"o-1","expectedVersion":1,"events":[{"type":"OrderShipped"}]}`}), http.StatusConflict)

	var read struct{ Commits []wire.Commit }
	h.do(req{method: "GET", path: "/v1/aggregates/Order/o-1/events"}).json(t, &read)
	if len(read.Commits) != 2 || read.Commits[0].Version != 1 || read.Commits[0].OwnerID != "b-1" || len(read.Commits[0].Events) != 2 ||
		string(read.Commits[0].Events[0].Data) != `{"n":1}` || string(read.Commits[0].Events[1].Data) != "null" ||
		read.Commits[1].Events[0].Type != "OrderShipped" || read.Commits[1].Time.IsZero() {
		t.Errorf("commits %+v", read.Commits)
	}
	h.do(req{method: "GET", path: "/v1/aggregates/Order/o-1/events?from=2&limit=5"}).json(t, &read)
	if len(read.Commits) != 1 || read.Commits[0].Version != 2 {
		t.Errorf("from=2: %+v", read.Commits)
	}
	h.do(req{method: "GET", path: "/v1/aggregates/Order/o-1/events?from=9"}).json(t, &read)
	if read.Commits == nil || len(read.Commits) != 0 {
		t.Errorf("from=9 of an aggregate at 2: %+v, want an empty list", read.Commits)
	}
}

// TestSubscriptionsAndParked follows the failure model's story
// (docs/failure-model.md) over the API: an unknown buyer parks its order;
// the record shows with its history, in the list and by key; the
// subscription counts it and shows its retry settings with their sources;
// resume and skip act on it. A search or a job filtered by a class no
// deployed module declares, no classifier rule names and no builtin class
// is answers 400 naming the nearest declared classes. A job's dry run
// leaves no audit entry; its creation names the job as the target.
func TestSubscriptionsAndParked(t *testing.T) {
	t.Parallel()
	h := newHost(t, "\n[[classifier.rules]]\nclass = \"TlsHandshake\"\nas = \"systemic\"\n")
	if r := h.upload("shipment-notifier", ""); r.status != http.StatusCreated {
		t.Fatalf("upload: %s", r)
	}
	h.ship("o-1", "b-1")
	h.ship("o-2", "unknown")
	h.waitParked("o-2")
	sub := "/v1/subscriptions/" + notifierSub

	var rec wire.ParkedRecord
	h.do(req{method: "GET", path: sub + "/parked/Order/o-2"}).json(t, &rec)
	if rec.Subscription != notifierSub || rec.AggregateType != "Order" || rec.AggregateID != "o-2" || rec.Version != 1 ||
		rec.State != wire.StateWaiting && rec.State != wire.StateRetrying || !slices.Contains(rec.Error.Classes, "UnknownBuyer") || len(rec.History) == 0 {
		t.Errorf("parked record %+v", rec)
	}
	// The park is counted just after its record is written: asked until then.
	checkfor.Nil(t, 20*time.Second, 10*time.Millisecond, func() error {
		return metricsHold(string(h.do(req{method: "GET", path: "/metrics"}).body),
			`berth_parked_aggregates{state="`+string(rec.State)+`",subscription="`+notifierSub+`"} 1`,
			`berth_parked_aggregates{state="resuming",subscription="`+notifierSub+`"} 0`,
			`berth_parked_oldest_first_failure_timestamp_seconds{subscription="`+notifierSub+`"}`,
			`berth_parked_groups{subscription="`+notifierSub+`"} 1`,
			`berth_parks_total{subscription="`+notifierSub+`"} 1`,
			`berth_handler_attempts_total{class="UnknownBuyer",outcome="unrecoverable",phase="delivery",subscription="`+notifierSub+`"} 1`,
			// Every outcome's series exists from the subscription's start, at 0 until it happens.
			`berth_handler_attempts_total{class="berth.Timeout",outcome="timeout",phase="delivery",subscription="`+notifierSub+`"} 0`,
			`berth_handler_attempts_total{class="none",outcome="recoverable",phase="long-horizon",subscription="`+notifierSub+`"} 0`,
			`berth_handler_duration_seconds_count{phase="delivery",subscription="`+notifierSub+`"}`,
			`berth_delivery_delay_seconds_count{phase="long-horizon",subscription="`+notifierSub+`"} 0`,
			`berth_job_items_total{action="resume",result="done"} 0`,
			`berth_jobs{state="running"} 0`,
			`berth_subscription_paused{subscription="`+notifierSub+`"} 0`,
			`berth_subscription_lag{subscription="`+notifierSub+`"}`,
			`berth_partition_fencings_total{subscription="`+notifierSub+`"} 0`,
			`berth_subscription_start_failures_total{subscription="`+notifierSub+`"} 0`,
			"berth_eventlog_head 2")
	})

	var page struct {
		Records []wire.ParkedRecord
		Next    string
	}
	for _, q := range []string{"", "?subscription=" + notifierSub, "?aggregateType=Order", "?state=" + string(rec.State), "?limit=1"} {
		h.do(req{method: "GET", path: "/v1/parked" + q}).json(t, &page)
		if len(page.Records) != 1 || page.Records[0].AggregateID != "o-2" {
			t.Errorf("GET /v1/parked%s: %+v", q, page)
		}
	}
	// A misspelt subscription is no empty list but a 404 with the nearest name.
	if r := h.do(req{method: "GET", path: "/v1/parked?subscription=ShipmentNotifier.onOrderShiped"}); r.status != http.StatusNotFound ||
		!strings.Contains(string(r.body), `did you mean \"ShipmentNotifier.onOrderShipped\"`) {
		t.Errorf("GET /v1/parked with a misspelt subscription: %s", r)
	}
	for q, n := range map[string]int{"UnknownBuyer": 1, "Notification": 1, "berth.Timeout": 0, "TlsHandshake": 0} {
		h.do(req{method: "GET", path: "/v1/parked?class=" + q}).json(t, &page)
		if page.Records == nil || len(page.Records) != n {
			t.Errorf("GET /v1/parked?class=%s: %+v, want %d records", q, page, n)
		}
	}
	for q, near := range map[string]string{
		"UnknownBuyr":    `nearest declared: "UnknownBuyer"`,
		"berth.Timout":   `nearest declared: "berth.Timeout"`,
		"TlsHandshak":    `nearest declared: "TlsHandshake"`,
		"PaymentDecline": "no deployed module declares it",
	} {
		p := problemOf(t, h.do(req{method: "GET", path: "/v1/parked?class=" + q}), http.StatusBadRequest)
		if p.Field != "class" || !strings.Contains(p.Detail, near) || !strings.Contains(p.Detail, strconv.Quote(q)) {
			t.Errorf("GET /v1/parked?class=%s: %+v, want the class field, the class and %s", q, p, near)
		}
	}
	for _, body := range []string{
		`{"action":"resume","dryRun":true,"filter":{"class":"UnknownByer"}}`,
		`{"action":"resume","reason":"r","filter":{"class":"UnknownByer"}}`,
	} {
		p := problemOf(t, h.do(req{method: "POST", path: "/v1/jobs", body: body}), http.StatusBadRequest)
		if p.Field != "filter.class" || !strings.Contains(p.Detail, `nearest declared: "UnknownBuyer"`) {
			t.Errorf("POST /v1/jobs %s: %+v", body, p)
		}
	}
	for _, q := range []string{"?aggregateType=Invoice", "?state=resuming"} {
		h.do(req{method: "GET", path: "/v1/parked" + q}).json(t, &page)
		if page.Records == nil || len(page.Records) != 0 {
			t.Errorf("GET /v1/parked%s: %+v, want an empty list", q, page)
		}
	}

	var st wire.Subscription
	h.do(req{method: "GET", path: sub}).json(t, &st)
	if st.Name != notifierSub || st.Module != "shipment-notifier" || st.State != "running" || st.Head == nil || *st.Head != 2 ||
		st.Parked[rec.State] != 1 || len(st.Partitions) == 0 {
		t.Errorf("subscription %+v", st)
	}
	if s := st.Retry["max-attempts"]; s.Value != float64(5) || s.Source != "processor" {
		t.Errorf("max-attempts %+v, want 5 from the processor", s)
	}
	if s := st.Retry["backpressure-attempts"]; s.Source != "default" {
		t.Errorf("backpressure-attempts %+v, want the host default", s)
	}
	if len(st.Retry) != 7 || st.ParkedRetries.FirstDelay == "" {
		t.Errorf("retry settings %+v, parked %+v", st.Retry, st.ParkedRetries)
	}
	var all struct{ Subscriptions []wire.Subscription }
	h.do(req{method: "GET", path: "/v1/subscriptions"}).json(t, &all)
	if len(all.Subscriptions) != 1 || all.Subscriptions[0].Name != notifierSub {
		t.Errorf("subscriptions %+v", all.Subscriptions)
	}

	h.do(req{method: "POST", path: sub + "/pause"}).json(t, &st)
	if st.State != "paused" {
		t.Errorf("after pause: %s", st.State)
	}
	h.do(req{method: "POST", path: sub + "/unpause"}).json(t, &st)
	if st.State != "running" {
		t.Errorf("after unpause: %s", st.State)
	}
	if r := h.do(req{method: "POST", path: sub + "/reset", body: `{"position":3}`}); r.status != http.StatusOK {
		t.Errorf("reset to the end: %s", r)
	}

	// Resume: the service still does not know the buyer, so it parks again;
	// the history keeps who resumed it and why. Resuming is repeatable.
	for range 2 {
		r := h.do(req{method: "POST", path: sub + "/parked/Order/o-2/resume", body: `{"reason":"buyer fixed"}`})
		if r.status != http.StatusAccepted || !strings.Contains(string(r.body), "resuming") {
			t.Fatalf("resume: %s", r)
		}
	}
	checkfor.Nil(t, 20*time.Second, 10*time.Millisecond, func() error {
		if h.do(req{method: "GET", path: sub + "/parked/Order/o-2"}).json(t, &rec); rec.State == wire.StateResuming {
			return fmt.Errorf("still resuming: %+v", rec)
		}
		return nil
	})
	if !slices.ContainsFunc(rec.History, func(e wire.HistoryEntry) bool {
		return e.Action == "resume" && e.Actor == "local" && e.Reason == "buyer fixed"
	}) {
		t.Errorf("history %+v has no resume by local", rec.History)
	}

	// Skip with an empty chunked body: the body is optional.
	if r := h.do(req{method: "POST", path: sub + "/parked/Order/o-2/skip", chunked: true}); r.status != http.StatusAccepted {
		t.Fatalf("skip: %s", r)
	}
	// The record goes once the replay past the skipped versions is done.
	checkfor.Nil(t, 20*time.Second, 10*time.Millisecond, func() error {
		if r := h.do(req{method: "GET", path: sub + "/parked/Order/o-2"}); r.status != http.StatusNotFound {
			return fmt.Errorf("still parked after skip: %s", r)
		}
		return nil
	})
	problemOf(t, h.do(req{method: "POST", path: sub + "/parked/Order/o-2/skip"}), http.StatusNotFound)
	problemOf(t, h.do(req{method: "POST", path: sub + "/parked/Order/o-2/resume"}), http.StatusNotFound)

	var dry wire.JobDryRun
	h.do(req{method: "POST", path: "/v1/jobs", body: `{"action":"resume","dryRun":true,"filter":{"class":"berth.Timeout"}}`}).json(t, &dry)
	r := h.do(req{method: "POST", path: "/v1/jobs", body: `{"action":"skip","reason":"timeouts","filter":{"class":"berth.Timeout"}}`})
	if r.status != http.StatusCreated {
		t.Fatalf("create: %s", r)
	}
	var j wire.Job
	r.json(t, &j)
	var audit wire.AuditPage
	h.do(req{method: "GET", path: "/v1/audit?limit=1000"}).json(t, &audit)
	var jobsEntries []wire.AuditEntry
	for _, e := range audit.Entries {
		if e.Action == "POST /v1/jobs" {
			jobsEntries = append(jobsEntries, e)
		}
	}
	if len(jobsEntries) != 1 || jobsEntries[0].Target != strconv.FormatUint(j.ID, 10) || jobsEntries[0].Reason != "timeouts" ||
		jobsEntries[0].Status != http.StatusCreated {
		t.Errorf("audit entries of POST /v1/jobs %+v, want the creation of job %d only, naming it", jobsEntries, j.ID)
	}
}

// TestParkedDetail: the record as served also shows the event it stopped at
// and how many later commits of the aggregate wait behind the park.
func TestParkedDetail(t *testing.T) {
	t.Parallel()
	h := newHost(t, "")
	if r := h.upload("shipment-notifier", ""); r.status != http.StatusCreated {
		t.Fatalf("upload: %s", r)
	}
	h.ship("o-9", "unknown")
	h.waitParked("o-9")
	h.ship("o-9", "unknown")
	h.ship("o-9", "unknown")
	var detail struct {
		Version     uint64
		Event       *struct{ Type string }
		HeldCommits uint64
	}
	h.do(req{method: "GET", path: "/v1/subscriptions/" + notifierSub + "/parked/Order/o-9"}).json(t, &detail)
	if detail.Version != 1 || detail.Event == nil || detail.Event.Type != "OrderShipped" || detail.HeldCommits != 2 {
		t.Errorf("parked detail: version %d, event %+v, held %d; want version 1, its OrderShipped, 2 held commits",
			detail.Version, detail.Event, detail.HeldCommits)
	}
}

// metricsHold is nil when the scrape holds every line wanted, else an error
// naming the first it lacks.
func metricsHold(scrape string, wants ...string) error {
	for _, want := range wants {
		if !strings.Contains(scrape, want) {
			return fmt.Errorf("metrics lack %q", want)
		}
	}
	return nil
}
