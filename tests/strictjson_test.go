package tests

import (
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestAmbiguousJSONRefused: through the binary, a body with a key given
// twice (at any depth, or in another case than the field's) or a string
// that is not valid Unicode (a lone surrogate escape, invalid UTF-8 bytes)
// is a 400 problem naming the field, on appends and on the operator's
// verbs, and nothing is appended or changed — before, the last key won and
// such strings became U+FFFD, an aggregate id changed behind the client's
// back. A valid surrogate pair is the character it encodes, and that
// aggregate can be read back by its id.
func TestAmbiguousJSONRefused(t *testing.T) {
	svc := newNotifier(t)
	h := newHost(t, hostConfig{NotifyURL: svc.URL(), Extra: fastRetry})
	h.uploadNotifier(t, 201)
	svc.set("ghost", behaviour{Unknown: true})
	h.appendShipped(t, "o-p", "ghost")
	h.waitParked(t, "o-p", 20*time.Second)
	parked := "/v1/subscriptions/" + subName + "/parked/Order/o-p"
	record := string(h.must(200, "GET", parked, nil).Body)

	event := func(id, data string) string {
		return `{"aggregateType":"Order","aggregateId":` + id + `,"ownerId":"ann","events":[{"type":"OrderShipped","data":` + data + `}]}`
	}
	for _, tc := range []struct {
		name, path, body, field string
	}{
		{"duplicate id", "/v1/events", `{"aggregateType":"Order","aggregateId":"o-1","aggregateId":"o-2","events":[{"type":"OrderShipped"}]}`, "aggregateId"},
		{"duplicate deep in data", "/v1/events", event(`"o-1"`, `{"carrier":{"name":"DHL","name":"UPS"}}`), "events[0].data.carrier.name"},
		{"id in another case", "/v1/events", `{"aggregateType":"Order","aggregateId":"o-1","aggregateID":"o-2","events":[{"type":"OrderShipped"}]}`, "aggregateID"},
		{"lone high surrogate", "/v1/events", event(`"o-\ud800"`, `{}`), "aggregateId"},
		{"lone low surrogate", "/v1/events", event(`"o-\udc00"`, `{}`), "aggregateId"},
		{"high surrogate, no low", "/v1/events", event(`"o-\ud83d-x"`, `{}`), "aggregateId"},
		{"invalid UTF-8", "/v1/events", event("\"o-\xff\"", `{}`), "aggregateId"},
		{"invalid UTF-8 in data", "/v1/events", event(`"o-1"`, "{\"carrier\":\"\xe2\x28\xa1\"}"), "events[0].data.carrier"},
		{"skip, duplicate throughVersion", parked + "/skip", `{"throughVersion":1,"throughVersion":0}`, "throughVersion"},
		{"resume, surrogate in the reason", parked + "/resume", `{"reason":"\udfff"}`, "reason"},
	} {
		r := h.request("POST", tc.path, tc.body)
		p := brokenProblem(t, r)
		if r.Status != 400 || p.Field != tc.field || p.Type != "https://berth.dev/problems/invalid-json" {
			t.Errorf("%s: %s, want a 400 invalid-json problem naming %s", tc.name, r, tc.field)
		}
	}
	for _, id := range []string{"o-1", "o-2", "o-\ufffd", "o-\ufffd-x"} {
		h.must(404, "GET", "/v1/aggregates/Order/"+url.PathEscape(id)+"/events", nil)
	}
	if got := string(h.must(200, "GET", parked, nil).Body); got != record {
		t.Errorf("the parked record changed:\nbefore %s\nafter  %s", record, got)
	}

	h.must(201, "POST", "/v1/events", event(`"o-\ud83d\ude00"`, `{"carrier":"DHL \ud83d\ude9a"}`))
	var ev struct {
		Commits []struct {
			AggregateID string `json:"aggregateId"`
			Events      []struct {
				Data struct {
					Carrier string `json:"carrier"`
				} `json:"data"`
			} `json:"events"`
		} `json:"commits"`
	}
	h.must(200, "GET", "/v1/aggregates/Order/"+url.PathEscape("o-😀")+"/events", nil).JSON(t, &ev)
	if len(ev.Commits) != 1 || ev.Commits[0].AggregateID != "o-😀" || !strings.HasSuffix(ev.Commits[0].Events[0].Data.Carrier, "🚚") {
		t.Errorf("the aggregate appended with surrogate pairs: %+v", ev.Commits)
	}
}
