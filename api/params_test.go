package api

import (
	"net/http"
	"strings"
	"testing"
)

// TestBodiesDecodedStrictly: a key given twice (at any depth, an event's
// data included, or differing only in case, which encoding/json v1 took
// for the same field), a string that is not valid Unicode (a lone UTF-16
// surrogate escape, invalid UTF-8 bytes) and a key in another case than
// the field's are 400s naming the field, on every route that reads a JSON
// body, and nothing is appended or changed. A valid surrogate pair stays
// what it encodes.
func TestBodiesDecodedStrictly(t *testing.T) {
	t.Parallel()
	h := newHost(t, "")
	sub := "/v1/subscriptions/" + notifierSub
	event := func(id, data string) string {
		return `{"aggregateType":"Order","aggregateId":` + id + `,"events":[{"type":"A","data":` + data + `}]}`
	}
	tests := []struct {
		name, path, body string
		field            string // the field the problem names
		detail           string // a part of its detail
	}{
		{"duplicate aggregateId", "/v1/events", `{"aggregateType":"Order","aggregateId":"a","aggregateId":"b","events":[{"type":"A"}]}`, "aggregateId", `key "aggregateId" appears twice`},
		{"duplicate in an event", "/v1/events", `{"aggregateType":"Order","aggregateId":"a","events":[{"type":"A","type":"B"}]}`, "events[0].type", `key "type" appears twice in events[0]`},
		{"duplicate deep in data", "/v1/events", event(`"a"`, `{"x":[{"y":1},{"y":1,"y":2}]}`), "events[0].data.x[1].y", `key "y" appears twice in events[0].data.x[1]`},
		{"duplicate in data after a long string", "/v1/events", `{"aggregateType":"Order","aggregateId":"a","events":[{"type":"OrderShipped","data":{"carrier":{"name":"DHL","name":"UPS"}}}]}`, "events[0].data.carrier.name", `key "name" appears twice in events[0].data.carrier`},
		{"duplicate in reset", sub + "/reset", `{"position":1,"position":2}`, "position", `key "position" appears twice`},
		{"duplicate in resume", sub + "/parked/Order/o-1/resume", `{"reason":"a","reason":"b"}`, "reason", `key "reason" appears twice`},
		{"duplicate in skip", sub + "/parked/Order/o-1/skip", `{"throughVersion":1,"throughVersion":2}`, "throughVersion", `key "throughVersion" appears twice`},
		{"same key in another case", "/v1/events", `{"aggregateType":"Order","aggregateId":"a","aggregateID":"b","events":[{"type":"A"}]}`, "aggregateID", `unknown field "aggregateID"`},
		{"key in another case", "/v1/events", `{"AggregateType":"Order","aggregateId":"a","events":[{"type":"A"}]}`, "AggregateType", `unknown field "AggregateType"`},
		{"unknown field in an event", "/v1/events", `{"aggregateType":"Order","aggregateId":"a","events":[{"type":"A","payload":{}}]}`, "events[0].payload", `unknown field "payload" in events[0]`},
		{"lone high surrogate", "/v1/events", event(`"\ud800"`, `{}`), "aggregateId", "not valid Unicode"},
		{"lone low surrogate", "/v1/events", event(`"\udc00"`, `{}`), "aggregateId", "not valid Unicode"},
		{"high surrogate then no low", "/v1/events", event(`"\ud83dx"`, `{}`), "aggregateId", "not valid Unicode"},
		{"high surrogate then another high", "/v1/events", event(`"\ud83d\ud83d"`, `{}`), "aggregateId", "not valid Unicode"},
		{"surrogate in an event type", "/v1/events", `{"aggregateType":"Order","aggregateId":"a","events":[{"type":"\udfff"}]}`, "events[0].type", "not valid Unicode"},
		{"surrogate in data", "/v1/events", event(`"a"`, `{"note":["ok","\ud800"]}`), "events[0].data.note[1]", "not valid Unicode"},
		{"surrogate in a reason", sub + "/parked/Order/o-1/skip", `{"reason":"\ud800"}`, "reason", "not valid Unicode"},
		{"invalid UTF-8 in an id", "/v1/events", event("\"a\xffb\"", `{}`), "aggregateId", "not valid Unicode"},
		{"invalid UTF-8 in data", "/v1/events", event(`"a"`, "{\"k\":\"\xc3\x28\"}"), "events[0].data.k", "not valid Unicode"},
		{"invalid UTF-8 in a key", "/v1/events", "{\"aggr\xffegateType\":\"Order\"}", "", "not valid Unicode"},
		{"surrogate in a key", "/v1/events", `{"\ud800":1}`, "", "not valid Unicode"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := problemOf(t, h.do(req{method: "POST", path: tt.path, body: tt.body}), http.StatusBadRequest)
			if p.Type != "https://berth.dev/problems/invalid-json" || p.Field != tt.field || !strings.Contains(p.Detail, tt.detail) {
				t.Errorf("problem %+v, want invalid-json naming field %q and saying %q", p, tt.field, tt.detail)
			}
		})
	}
	for _, id := range []string{"a", "b", "\ufffd", "a\ufffdb"} {
		if v, err := h.events.Version(t.Context(), "Order", id); err != nil || v != 0 {
			t.Errorf("Order/%q at version %d (%v) after refused appends", id, v, err)
		}
	}

	// A valid pair is the character it encodes.
	r := h.do(req{method: "POST", path: "/v1/events", body: event(`"smile-\ud83d\ude00"`, `{"e":"\ud83d\ude00"}`)})
	if r.status != http.StatusCreated {
		t.Fatalf("append with a surrogate pair: %s", r)
	}
	if v, err := h.events.Version(t.Context(), "Order", "smile-😀"); err != nil || v != 1 {
		t.Errorf("Order/smile-😀 at version %d (%v), want 1", v, err)
	}
}
