package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/api/wire"
	"github.com/berthhq/berth/config"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/subscription"
	"github.com/labstack/echo/v4"
)

// oddIDs are aggregate ids that can be appended and must be addressable on
// every route: each differs from another only by how it would be escaped or
// decoded (a/b, a%2Fb, a%252Fb), or holds what a URL gives meaning to.
var oddIDs = []string{
	"a/b", "a%2Fb", "a%252Fb", "%2E%2E", "%2e", "...", ".a", "a/..", "../a", "./a", "%", "%zz", "x:y@z", "q?x=1#frag",
	"sp ace", "plus+sign", "semi;colon", "ünï/cødé", "tab\there", "a\\b", "~!$&'()*,=",
}

// esc is a path segment for id, as a client that follows RFC 3986 sends it.
func esc(id string) string { return url.PathEscape(id) }

// TestOddIDsAddressable parks an aggregate for each odd id and reaches it on
// every route that names an aggregate: its events, its record, and skip or
// resume — each reaching that aggregate and no other.
func TestOddIDsAddressable(t *testing.T) {
	t.Parallel()
	h := newHost(t, "")
	if r := h.upload("shipment-notifier", ""); r.status != http.StatusCreated {
		t.Fatalf("upload: %s", r)
	}
	for _, id := range oddIDs {
		if r := h.ship(id, "unknown"); r.status != http.StatusCreated {
			t.Fatalf("append %q: %s", id, r)
		}
	}
	for _, id := range oddIDs {
		h.waitParked(id)
	}
	// Names of modules and subscriptions are decoded the same way.
	h.do(req{method: "GET", path: "/v1/modules/shipment%2Dnotifier"}).json(t, &struct{}{})
	if r := h.do(req{method: "GET", path: "/v1/subscriptions/ShipmentNotifier%2EonOrderShipped"}); r.status != http.StatusOK {
		t.Errorf("GET a subscription with its dot escaped: %s", r)
	}
	parked := "/v1/subscriptions/" + strings.ReplaceAll(notifierSub, ".", "%2E") + "/parked/Order/"
	for i, id := range oddIDs {
		var ev struct {
			Commits []wire.Commit `json:"commits"`
		}
		h.do(req{method: "GET", path: "/v1/aggregates/Order/" + esc(id) + "/events"}).json(t, &ev)
		if len(ev.Commits) != 1 || ev.Commits[0].AggregateID != id {
			t.Errorf("events of %q: %+v", id, ev.Commits)
		}
		var rec wire.ParkedRecordDetail
		h.do(req{method: "GET", path: parked + esc(id)}).json(t, &rec)
		if rec.Subscription == "" || rec.AggregateID != id || rec.Event == nil {
			t.Errorf("record of %q: %+v", id, rec)
		}
		action := "skip"
		if i%2 == 1 {
			action = "resume"
		}
		if r := h.do(req{method: "POST", path: parked + esc(id) + "/" + action, body: `{"reason":"odd id"}`}); r.status != http.StatusAccepted {
			t.Errorf("%s %q: %s", action, id, r)
		}
		if action == "skip" {
			h.waitGone(id)
		}
		// Every other aggregate not yet acted on is still parked, as it was.
		for _, other := range oddIDs[i+1:] {
			if _, err := h.engine.Parked(context.Background(), notifierSub, "Order", other); err != nil {
				t.Fatalf("%s of %q touched %q: %v", action, id, other, err)
			}
		}
	}
}

// TestSkipEndsOnlyItsOwnRecord is the case of issue 9: a skip of a/b must
// not end the record of a%2Fb, whichever way the request is escaped, and a
// skip of a%2Fb (sent as a%252Fb, which has no raw path) must not end a/b.
func TestSkipEndsOnlyItsOwnRecord(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ skip, keep string }{
		{"a/b", "a%2Fb"},
		{"a%2Fb", "a/b"},
		{"%2E%2E", "%252E%252E"},
	} {
		t.Run(tc.skip, func(t *testing.T) {
			t.Parallel()
			h := newHost(t, "")
			h.upload("shipment-notifier", "")
			h.ship(tc.skip, "unknown")
			h.ship(tc.keep, "unknown")
			h.waitParked(tc.skip)
			h.waitParked(tc.keep)
			parked := "/v1/subscriptions/" + notifierSub + "/parked/Order/"
			before := h.do(req{method: "GET", path: parked + esc(tc.keep)})
			if before.status != http.StatusOK {
				t.Fatalf("record of %q: %s", tc.keep, before)
			}
			if r := h.do(req{method: "POST", path: parked + esc(tc.skip) + "/skip"}); r.status != http.StatusAccepted {
				t.Fatalf("skip %q: %s", tc.skip, r)
			}
			h.waitGone(tc.skip)
			problemOf(t, h.do(req{method: "GET", path: parked + esc(tc.skip)}), http.StatusNotFound)
			after := h.do(req{method: "GET", path: parked + esc(tc.keep)})
			if after.status != http.StatusOK || string(after.body) != string(before.body) {
				t.Errorf("the record of %q after a skip of %q:\n%s\nwant it intact:\n%s", tc.keep, tc.skip, after, before)
			}
		})
	}
}

// TestUnaddressableNamesRefused: an aggregate type or id that no browser URL
// can name is refused at append with a 400 naming the field and the rule,
// and nothing is stored.
func TestUnaddressableNamesRefused(t *testing.T) {
	t.Parallel()
	h := newHost(t, "")
	for _, tc := range []struct{ typ, id, field, rule string }{
		{"Order", "..", "aggregateId", `must not be "." or ".."`},
		{"Order", ".", "aggregateId", `must not be "." or ".."`},
		{"..", "o-1", "aggregateType", `must not be "." or ".."`},
		{".", "o-1", "aggregateType", `must not be "." or ".."`},
		{"Order", `a\u0000b`, "aggregateId", "must not hold NUL"},
		{`\u0000`, "o-1", "aggregateType", "must not hold NUL"},
		{"Order", "", "aggregateId", "required"},
		{"", "o-1", "aggregateType", "required"},
	} {
		body := `{"aggregateType":"` + tc.typ + `","aggregateId":"` + tc.id + `","events":[{"type":"OrderShipped"}]}`
		p := problemOf(t, h.do(req{method: "POST", path: "/v1/events", token: deployerToken, body: body}), http.StatusBadRequest)
		if p.Field != tc.field || !strings.Contains(p.Detail, tc.rule) {
			t.Errorf("append %s/%s: %+v, want field %s and the rule %q", tc.typ, tc.id, p, tc.field, tc.rule)
		}
	}
	if head, err := h.events.Head(context.Background()); err != nil || head != 0 {
		t.Errorf("head after refused appends: %d, %v; want 0", head, err)
	}
}

// TestPathParamsDecodedOnce: every route's parameters are decoded exactly
// once, whether or not the request has a raw path: a projection key a%2Fb
// is not the key a/b.
func TestPathParamsDecodedOnce(t *testing.T) {
	t.Parallel()
	s := New(Deps{Config: config.Default})
	var got []string
	s.e.GET("/test/:a/:b", func(c echo.Context) error {
		got = append(got, c.Param("a")+"|"+c.Param("b"))
		return nil
	}, decodePathParams)
	for _, tc := range []struct{ path, want string }{
		{"/test/a%2Fb/c", "a/b|c"},     // a raw path: echo routes on it
		{"/test/a%252Fb/c", "a%2Fb|c"}, // no raw path: already decoded
		{"/test/a%252Fb/c%2Fd", "a%2Fb|c/d"},
		{"/test/%2E%2E/%25", "..|%"},
		{"/test/x%20y/%C3%BC", "x y|ü"},
		{"/test/a%62/c", "ab|c"}, // an escape that needs none
	} {
		got = nil
		serve(s, req{method: "GET", path: tc.path})
		if len(got) != 1 || got[0] != tc.want {
			t.Errorf("GET %s: params %q, want %q", tc.path, got, tc.want)
		}
	}
}

// waitGone waits until the record of order has left the ledger (a skip
// ends it once the subscription has moved past the skipped versions).
func (h *testHost) waitGone(order string) {
	h.t.Helper()
	checkfor.Nil(h.t, 20*time.Second, 10*time.Millisecond, func() error {
		rec, err := h.engine.Parked(context.Background(), notifierSub, "Order", order)
		if errors.Is(err, subscription.ErrNotParked) {
			return nil
		}
		return fmt.Errorf("the record of %q did not leave the ledger: %+v, %v", order, rec, err)
	})
}
