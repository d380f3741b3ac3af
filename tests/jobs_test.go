package tests

import (
	"fmt"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"strings"
	"testing"
	"time"
)

type jobView struct {
	ID       uint64    `json:"id"`
	State    string    `json:"state"`
	Matched  int       `json:"matched"`
	Done     int       `json:"done"`
	Failed   int       `json:"failed"`
	Gone     int       `json:"gone"`
	Rate     float64   `json:"rate"`
	Actor    string    `json:"actor"`
	Created  time.Time `json:"created"`
	Finished time.Time `json:"finished"`
	Failures []struct {
		AggregateID string `json:"aggregateId"`
		Error       string `json:"error"`
	} `json:"failures"`
}

func (h *hostProc) job(t testing.TB, id uint64) jobView {
	t.Helper()
	var j jobView
	h.must(200, "GET", fmt.Sprintf("/v1/jobs/%d", id), nil).JSON(t, &j)
	return j
}

// TestBulkResumeSurvivesACrash is the operator's morning: 1,000 aggregates
// parked by one cause. A dry run counts them and shows a sample; a bulk
// resume runs at its rate limit; the host is killed in the middle and
// started again, and the job goes on where it was: every aggregate is
// notified, the ledger is empty, and the job took at least as long as its
// rate allows.
func TestBulkResumeSurvivesACrash(t *testing.T) {
	const n = 1000
	svc := newNotifier(t)
	h := newHost(t, hostConfig{NotifyURL: svc.URL(), Extra: fastRetry})
	h.uploadNotifier(t, 201)
	svc.set("ghost", behaviour{Unknown: true})
	h.appendShippedMany(t, "o-%04d", n, "ghost")
	h.appendShipped(t, "other", "alice") // not parked: not the job's
	checkfor.Within(t, 60*time.Second, func() error { return parkedWaiting(h.subscription(t), n) })

	post := func(body string) response {
		return h.request("POST", "/v1/jobs", []byte(body), "Content-Type", "application/json")
	}
	// A dry run first: the count and a sample, nothing changed.
	r := post(`{"action": "resume", "filter": {"class": "Notification", "message": "ghost"}, "dryRun": true}`)
	if r.Status != 200 || !strings.Contains(string(r.Body), `"matched":1000`) || !strings.Contains(string(r.Body), `"aggregateId":"o-0000"`) {
		t.Fatalf("dry run: %s", r.String()[:min(len(r.String()), 400)])
	}
	// Bad jobs are refused, naming the field.
	for _, tc := range []struct{ body, field string }{
		{`{"action": "resume", "filter": {}}`, "reason"},
		{`{"action": "replay", "filter": {}, "reason": "x"}`, "action"},
		{`{"action": "resume", "filter": {}, "reason": "x", "rate": 50000}`, "rate"},
		{`{"action": "resume", "filter": {"subscriptions": ["Nope.h"]}, "reason": "x"}`, "Nope.h"},
		{`{"action": "resume", "filter": {"state": "lost"}, "reason": "x"}`, "state"},
	} {
		if r := post(tc.body); r.Status != 400 || !strings.Contains(string(r.Body), tc.field) {
			t.Errorf("POST /v1/jobs %s: %s; want 400 naming %s", tc.body, r, tc.field)
		}
	}
	if st := h.subscription(t); st.Parked["waiting"] != n {
		t.Fatalf("the dry run and refused jobs changed the ledger: %v", st.Parked)
	}

	svc.set("ghost", behaviour{}) // the service knows ghost now
	var j jobView
	r = post(`{"action": "resume", "filter": {"class": "UnknownBuyer"}, "reason": "ghost imported", "rate": 200}`)
	if r.Status != 201 {
		t.Fatalf("create the job: %s", r)
	}
	r.JSON(t, &j)
	if j.Matched != n || j.State != "running" || j.Rate != 200 {
		t.Fatalf("the job: %+v", j)
	}
	checkfor.Within(t, 30*time.Second, func() error {
		if got := h.job(t, j.ID); got.Done < n/3 {
			return fmt.Errorf("the job %s, %d of %d done, want a third", got.State, got.Done, n)
		}
		return nil
	})
	h.Kill()
	h = h.restart(t)
	checkfor.Within(t, 60*time.Second, func() error {
		if got := h.job(t, j.ID); got.State != "done" {
			return fmt.Errorf("the job %s after the restart, %d of %d done", got.State, got.Done, n)
		}
		return nil
	})
	j = h.job(t, j.ID)
	if j.Done+j.Gone != n || j.Failed != 0 || j.Done < n-10 {
		t.Errorf("the finished job: done %d, gone %d, failed %d (%+v); want all %d", j.Done, j.Gone, j.Failed, j.Failures, n)
	}
	// A job may act on a tenth of a second's worth at once (20 at 200/s),
	// at each of its two starts.
	if took := j.Finished.Sub(j.Created); took < time.Duration(float64(n-2*20)/200*float64(time.Second)) {
		t.Errorf("1,000 resumes at 200/s took %v: faster than the rate allows", took)
	}
	for i := range n {
		svc.waitNotified(t, key(fmt.Sprintf("o-%04d", i), 1), 30*time.Second)
	}
	checkfor.Within(t, 30*time.Second, func() error { return h.noneParked(t) })
	if c := svc.notified(key("other", 1)); c != 1 {
		t.Errorf("the aggregate outside the job was notified %d times", c)
	}
	// A finished job cannot be cancelled; the list shows it.
	if r := h.request("POST", fmt.Sprintf("/v1/jobs/%d/cancel", j.ID), nil); r.Status != 409 {
		t.Errorf("cancel a done job: %s", r)
	}
	if r := h.must(200, "GET", "/v1/jobs", nil); !strings.Contains(string(r.Body), fmt.Sprintf(`"id":%d`, j.ID)) {
		t.Errorf("GET /v1/jobs: %s", r)
	}
}
