package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/berthhq/berth/config"
)

// TestQueryParametersChecked walks the route table: on every route, an
// unknown query parameter (a misspelt filter among them), a documented one
// given twice and a query string that is not validly encoded are each a
// 400 invalid-query problem naming the parameter, before the handler runs
// (this server has none of the parts a handler needs).
func TestQueryParametersChecked(t *testing.T) {
	t.Parallel()
	s := New(Deps{Config: config.Default})
	doc := openapiMap(t)
	for _, rt := range s.routeTable() {
		path := samplePath(rt.path)
		type bad struct{ query, field, detail string }
		cases := []bad{
			{"?bogus=1", "bogus", `unknown query parameter "bogus"`},
			{"?a=%zz", "", "not validly encoded"},
			{"?a=1;b=2", "", "not validly encoded"},
		}
		for name := range parametersOf(doc, operation(doc, rt.method, openapiPath(rt.path)), "query") {
			cases = append(cases,
				bad{"?" + name + "=1&" + name + "=2", name, "given 2 times"},
				bad{"?" + strings.ToUpper(name) + "=1", strings.ToUpper(name), "takes only"})
		}
		for _, tc := range cases {
			r := serveRecovered(s, req{method: rt.method, path: path + tc.query})
			if r.status == 0 {
				t.Errorf("%s %s%s reached its handler", rt.method, path, tc.query)
				continue
			}
			p := problemOf(t, r, http.StatusBadRequest)
			if p.Type != "https://berth.dev/problems/invalid-query" || p.Field != tc.field || !strings.Contains(p.Detail, tc.detail) {
				t.Errorf("%s %s%s: %+v, want invalid-query naming %q and saying %q", rt.method, path, tc.query, p, tc.field, tc.detail)
			}
		}
	}
}

// TestDocumentedQueryParametersPass: a documented parameter, once, reaches
// the handler (here a real one, over real parts).
func TestDocumentedQueryParametersPass(t *testing.T) {
	t.Parallel()
	h := newHost(t, "")
	if r := h.ship("o-1", "b-1"); r.status != http.StatusCreated {
		t.Fatalf("append: %s", r)
	}
	for _, path := range []string{"/v1/parked?subscription=&state=waiting&aggregateType=Order&class=berth.Timeout&message=m&failedAfter=2026-01-01T00:00:00Z&failedBefore=2027-01-01T00:00:00Z&limit=5", "/v1/aggregates/Order/o-1/events?from=1&limit=1", "/v1/parked?", "/v1/parked?limit="} {
		if r := h.do(req{method: "GET", path: path}); r.status != http.StatusOK {
			t.Errorf("GET %s: %s", path, r)
		}
	}
}
