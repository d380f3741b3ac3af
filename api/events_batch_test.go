package api

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/berthhq/berth/api/wire"
)

// TestBatchAppend appends one batch holding new aggregates, two commits of
// one aggregate and a version conflict: each gets its own result, the
// conflict leaves the others appended, and the log holds what the results
// say. Malformed batches are refused whole, naming the append at fault,
// and nothing of them is written.
func TestBatchAppend(t *testing.T) {
	t.Parallel()
	h := newHost(t, "")
	if r := h.do(req{method: "POST", path: "/v1/events", body: `{"aggregateType":"Order","aggregateId":"o-old","events":[{"type":"OrderPlaced"}]}`}); r.status != http.StatusCreated {
		t.Fatalf("append: %s", r)
	}
	body := `{"appends":[
		{"aggregateType":"Order","aggregateId":"o-1","expectedVersion":0,"events":[{"type":"OrderPlaced","data":{"n":1}}]},
		{"aggregateType":"Order","aggregateId":"o-old","expectedVersion":0,"events":[{"type":"OrderPlaced"}]},
		{"aggregateType":"Order","aggregateId":"o-1","expectedVersion":1,"events":[{"type":"OrderPaid"},{"type":"OrderShipped"}]},
		{"aggregateType":"Invoice","aggregateId":"i-1","ownerId":"b-1","events":[{"type":"InvoiceSent"}]}]}`
	r := h.do(req{method: "POST", path: "/v1/events/batch", body: body})
	if r.status != http.StatusOK {
		t.Fatalf("batch: %s", r)
	}
	var res wire.BatchAppendResult
	r.json(t, &res)
	if res.Appended != 3 || res.Failed != 1 || len(res.Results) != 4 {
		t.Fatalf("batch answered %+v, want 3 appended, 1 failed, 4 results", res)
	}
	want := []struct {
		status   int
		id       string
		version  uint64
		position uint64
	}{{201, "o-1", 1, 2}, {409, "o-old", 0, 0}, {201, "o-1", 2, 3}, {201, "i-1", 1, 4}}
	for i, w := range want {
		got := res.Results[i]
		if got.Status != w.status || got.AggregateID != w.id || got.Version != w.version || got.Position != w.position {
			t.Errorf("result %d: %+v, want status %d %s at version %d position %d", i, got, w.status, w.id, w.version, w.position)
		}
	}
	if p := res.Results[1].Problem; p == nil || p.Status != 409 || !strings.HasSuffix(p.Type, "/version-conflict") {
		t.Errorf("the conflict's problem: %+v", p)
	}
	var read struct{ Commits []wire.Commit }
	h.do(req{method: "GET", path: "/v1/aggregates/Order/o-1/events"}).json(t, &read)
	if len(read.Commits) != 2 || len(read.Commits[1].Events) != 2 {
		t.Errorf("o-1 holds %+v, want the batch's two commits", read.Commits)
	}

	many := `{"appends":[` + strings.Repeat(`{"aggregateType":"A","aggregateId":"a","events":[{"type":"E"}]},`, maxBatchAppends) + `{"aggregateType":"A","aggregateId":"a","events":[{"type":"E"}]}]}`
	for _, c := range []struct{ name, body, field string }{
		{"no appends", `{"appends":[]}`, "appends"},
		{"too many", many, "appends"},
		{"missing type", `{"appends":[{"aggregateType":"Order","aggregateId":"o-9","events":[{"type":"E"}]},{"aggregateId":"o-9","events":[{"type":"E"}]}]}`, "appends[1].aggregateType"},
		{"empty event type", `{"appends":[{"aggregateType":"Order","aggregateId":"o-9","events":[{"type":"E"}]},{"aggregateType":"Order","aggregateId":"o-8","events":[{"type":"E"},{"type":""}]}]}`, "appends[1].events[1].type"},
		{"no events", `{"appends":[{"aggregateType":"Order","aggregateId":"o-9","events":[]}]}`, "appends[0].events"},
		{"negative version", `{"appends":[{"aggregateType":"Order","aggregateId":"o-9","expectedVersion":-2,"events":[{"type":"E"}]}]}`, "appends[0].expectedVersion"},
		{"name too long", fmt.Sprintf(`{"appends":[{"aggregateType":"Order","aggregateId":"o-9","events":[{"type":"E"}]},{"aggregateType":"Order","aggregateId":"o-9","ownerId":%q,"events":[{"type":"E"}]}]}`, strings.Repeat("x", 5000)), "appends[1]"},
	} {
		p := problemOf(t, h.do(req{method: "POST", path: "/v1/events/batch", body: c.body}), http.StatusBadRequest)
		if p.Field != c.field {
			t.Errorf("%s: field %q, want %q (%s)", c.name, p.Field, c.field, p.Detail)
		}
	}
	if r := h.do(req{method: "GET", path: "/v1/aggregates/Order/o-9/events"}); r.status != http.StatusNotFound {
		t.Errorf("o-9, only in refused batches, answered %s", r)
	}
}
