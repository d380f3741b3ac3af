package tests

import (
	"strings"
	"testing"
	"time"
)

// TestQueryStringsChecked: through the binary, a misspelt filter, an
// unknown parameter, a parameter given twice and a query string that is
// not validly encoded are 400 invalid-query problems naming the parameter
// — before, they were ignored, so a misspelt filter listed every parked
// aggregate — and the documented filters still filter.
func TestQueryStringsChecked(t *testing.T) {
	svc := newNotifier(t)
	h := newHost(t, hostConfig{NotifyURL: svc.URL(), Extra: fastRetry})
	h.uploadNotifier(t, 201)
	svc.set("ghost", behaviour{Unknown: true})
	h.appendShipped(t, "o-q", "ghost")
	h.waitParked(t, "o-q", 20*time.Second)
	for _, tc := range []struct{ path, field string }{
		{"/v1/parked?aggregatetype=Invoice", "aggregatetype"},
		{"/v1/parked?subscripton=Nope.h", "subscripton"},
		{"/v1/parked?limit=1&limit=500", "limit"},
		{"/v1/parked?state=waiting;state=retrying", ""},
		{"/v1/parked?after=%zz", ""},
		{"/v1/aggregates/Order/o-q/events?from=1&from=2", "from"},
		{"/v1/modules?x", "x"},
		{"/v1/subscriptions/" + subName + "/pause?force=1", "force"},
	} {
		method := "GET"
		if strings.Contains(tc.path, "/pause") {
			method = "POST"
		}
		r := h.request(method, tc.path, nil)
		if p := brokenProblem(t, r); r.Status != 400 || p.Type != "https://berth.dev/problems/invalid-query" || p.Field != tc.field {
			t.Errorf("%s %s: %s, want 400 invalid-query naming %q", method, tc.path, r, tc.field)
		}
	}
	if st := h.subscription(t); st.State != "running" {
		t.Errorf("the subscription after a refused pause: %+v", st)
	}
	var page struct {
		Records []parkedRecord `json:"records"`
	}
	h.must(200, "GET", "/v1/parked?aggregateType=Invoice", nil).JSON(t, &page)
	if len(page.Records) != 0 {
		t.Errorf("?aggregateType=Invoice lists %+v", page.Records)
	}
	h.must(200, "GET", "/v1/parked?aggregateType=Order&state=waiting&limit=5", nil).JSON(t, &page)
	if len(page.Records) != 1 || page.Records[0].AggregateID != "o-q" {
		t.Errorf("?aggregateType=Order lists %+v", page.Records)
	}
}
