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
	for _, tc := range []struct{ method, path, field string }{
		{"GET", "/v1/parked?aggregatetype=Invoice", "aggregatetype"},
		{"GET", "/v1/parked?subscripton=Nope.h", "subscripton"},
		{"GET", "/v1/parked?limit=1&limit=500", "limit"},
		{"GET", "/v1/parked?state=waiting;state=retrying", ""},
		{"GET", "/v1/parked?after=%zz", ""},
		{"GET", "/v1/aggregates/Order/o-q/events?from=1&from=2", "from"},
		{"GET", "/v1/modules?x", "x"},
		{"POST", "/v1/subscriptions/" + subName + "/pause?force=1", "force"},
	} {
		refusedAs(t, h, tc.method, tc.path, nil, 400, "invalid-query", tc.field)
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

// TestMethodsOutsideTheTable: through the binary, HEAD of a GET route
// answers as GET does without a body (it was a 405); a method a path does
// not take is a 405 problem naming it, whose Allow header lists what the
// path takes (HEAD beside GET); OPTIONS lists them too.
func TestMethodsOutsideTheTable(t *testing.T) {
	h := newHost(t, hostConfig{})
	h.uploadNotifier(t, 201)
	for _, path := range []string{"/v1/modules", "/v1/modules/" + moduleName, "/v1/subscriptions/" + subName, "/healthz", "/console/"} {
		get := h.must(200, "GET", path, nil)
		head := h.request("HEAD", path, nil)
		if head.Status != 200 || len(head.Body) != 0 || head.Header.Get("Content-Type") != get.Header.Get("Content-Type") {
			t.Errorf("HEAD %s: %d %q, %d bytes of body; GET: %q", path, head.Status, head.Header.Get("Content-Type"), len(head.Body), get.Header.Get("Content-Type"))
		}
	}
	for _, tc := range []struct{ method, path, allow string }{
		{"PATCH", "/v1/modules/" + moduleName, "OPTIONS, DELETE, GET, HEAD, PUT"},
		{"DELETE", "/v1/events", "OPTIONS, POST"},
		{"PUT", "/v1/parked", "OPTIONS, GET, HEAD"},
		{"BREW", "/v1/modules", "OPTIONS, GET, HEAD"},
	} {
		r := h.request(tc.method, tc.path, nil)
		p := brokenProblem(t, r)
		if r.Status != 405 || r.Header.Get("Allow") != tc.allow || !strings.Contains(p.Detail, tc.method) || !strings.Contains(p.Detail, tc.allow) {
			t.Errorf("%s %s: %s, Allow %q; want 405 naming the method, Allow %q", tc.method, tc.path, r, r.Header.Get("Allow"), tc.allow)
		}
	}
	if r := h.request("OPTIONS", "/v1/modules/"+moduleName, nil); r.Status != 204 || r.Header.Get("Allow") != "OPTIONS, DELETE, GET, HEAD, PUT" {
		t.Errorf("OPTIONS: %d, Allow %q", r.Status, r.Header.Get("Allow"))
	}
}

// TestEncodedBodiesRefused: through the binary, a body with a content
// coding the host does not decode (it read the coded bytes as the body)
// or JSON labelled with a charset other than UTF-8 is a 415 problem, and
// nothing is stored.
func TestEncodedBodiesRefused(t *testing.T) {
	h := newHost(t, hostConfig{})
	event := `{"aggregateType":"Order","aggregateId":"o-e","events":[{"type":"OrderShipped"}]}`
	for _, tc := range []struct {
		method, path string
		body         any
		header       []string
	}{
		{"POST", "/v1/events", event, []string{"Content-Encoding", "gzip"}},
		{"POST", "/v1/events", event, []string{"Content-Type", "application/json; charset=utf-16"}},
		{"PUT", "/v1/modules/" + moduleName, notifierWasm, []string{"Content-Type", "application/wasm", "Content-Encoding", "gzip"}},
	} {
		refusedAs(t, h, tc.method, tc.path, tc.body, 415, "unsupported-media-type", "", tc.header...)
	}
	h.must(404, "GET", "/v1/aggregates/Order/o-e/events", nil)
	h.must(404, "GET", "/v1/modules/"+moduleName, nil)
}

// TestPathParamsNotUTF8ThroughTheHost: through the binary, a path
// parameter that decodes to bytes that are not UTF-8 is a 400 naming it
// (it was a 404 for a name shown with U+FFFD); valid odd names still reach
// their handler.
func TestPathParamsNotUTF8ThroughTheHost(t *testing.T) {
	h := newHost(t, hostConfig{})
	for _, tc := range []struct{ method, path, field string }{
		{"GET", "/v1/aggregates/Order/o-%FF/events", "id"},
		{"GET", "/v1/aggregates/%C3/x/events", "type"},
		{"GET", "/v1/modules/%FF", "name"},
		{"POST", "/v1/subscriptions/%ED%A0%80/pause", "name"},
	} {
		refusedAs(t, h, tc.method, tc.path, nil, 400, "invalid-path", tc.field)
	}
	h.must(404, "GET", "/v1/aggregates/Order/%C3%BC%2F%25/events", nil) // ü/% : valid, and not there
}

// refusedAs sends a request and checks that it is refused with a problem
// of status and kind (after https://berth.dev/problems/) naming field.
func refusedAs(t *testing.T, h *hostProc, method, path string, body any, status int, kind, field string, header ...string) {
	t.Helper()
	r := h.request(method, path, body, header...)
	if p := brokenProblem(t, r); r.Status != status || p.Type != "https://berth.dev/problems/"+kind || p.Field != field {
		t.Errorf("%s %s: %s, want %d %s naming %q", method, path, r, status, kind, field)
	}
}
