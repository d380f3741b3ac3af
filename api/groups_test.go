package api

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/berthhq/berth/api/wire"
	"github.com/berthhq/berth/ledger"
)

// TestParkedGroups: GET /v1/parked/groups lists the failure groups of the
// parked records biggest first with exact counts, one page at a time and
// by state; GET /v1/parked?group= lists a group's records; a job's
// filter takes a group; what is not a filter of groups is a 400 naming it.
func TestParkedGroups(t *testing.T) {
	h := newHost(t, "")
	causes := []struct {
		n       int
		classes []string
		msg     string
	}{
		{7, []string{"UnknownBuyer"}, "the notification service does not know buyer b-%d"},
		{3, []string{"berth.Timeout"}, "the call ran past its %dms deadline"},
		{1, []string{"berth.Panic"}, "nil map write at 0x%x"},
	}
	at := time.Date(2026, 12, 6, 4, 0, 0, 0, time.UTC)
	err := h.ledger.Update(context.Background(), func(tx ledger.Tx) error {
		for c, cs := range causes {
			for i := range cs.n {
				st := ledger.StateWaiting
				if i%2 == 1 {
					st = ledger.StateRetrying
				}
				r := &ledger.Record{Subscription: notifierSub, AggregateType: "Order", AggregateID: fmt.Sprintf("o-%d-%d", c, i),
					State: st, FirstFailure: at, LastFailure: at.Add(time.Duration(i) * time.Second), NextRetry: at.Add(time.Hour),
					Error: ledger.ErrorInfo{Classes: cs.classes, Message: fmt.Sprintf(cs.msg, 100+i), Module: "shipment-notifier v1"}}
				if err := tx.PutParked(r); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var page wire.ParkedGroupPage
	r := h.do(req{method: "GET", path: "/v1/parked/groups?subscription=" + notifierSub})
	if r.status != http.StatusOK {
		t.Fatalf("groups: %s", r)
	}
	r.json(t, &page)
	if len(page.Groups) != 3 || page.Next != "" {
		t.Fatalf("groups: %s", r)
	}
	for i, g := range page.Groups {
		if g.Count != causes[i].n || g.Classes[0] != causes[i].classes[0] || g.Modules["shipment-notifier v1"] != causes[i].n ||
			g.Module != "shipment-notifier" || g.SampleID == "" {
			t.Errorf("group %d: %+v", i, g)
		}
	}
	if g := page.Groups[0]; g.Message != "the notification service does not know buyer {}" ||
		!g.FirstFailure.Equal(at) || !g.LastFailure.Equal(at.Add(6*time.Second)) {
		t.Errorf("the first group: %+v", g)
	}
	first := page.Groups[0].Group

	// One a page, by state.
	var got []int
	after := ""
	for range 5 {
		r := h.do(req{method: "GET", path: "/v1/parked/groups?state=waiting&limit=1&after=" + after})
		var p wire.ParkedGroupPage
		r.json(t, &p)
		for _, g := range p.Groups {
			got = append(got, g.Count)
		}
		if after = p.Next; after == "" {
			break
		}
	}
	if fmt.Sprint(got) != "[4 2 1]" {
		t.Errorf("waiting, one a page: %v, want [4 2 1]", got)
	}

	var records wire.ParkedPage
	h.do(req{method: "GET", path: "/v1/parked?group=" + first + "&limit=1000"}).json(t, &records)
	if len(records.Records) != 7 {
		t.Errorf("/v1/parked?group=%s listed %d, want 7", first, len(records.Records))
	}
	var dry wire.JobDryRun
	r = h.do(req{method: "POST", path: "/v1/jobs", body: fmt.Sprintf(`{"action":"skip","dryRun":true,"filter":{"group":%q,"state":"retrying"}}`, first)})
	r.json(t, &dry)
	if dry.Matched != 3 {
		t.Errorf("a dry run of the group's retrying: %s, want 3 matched", r)
	}

	for _, tc := range []struct{ query, field string }{
		{"state=stuck", "state"}, {"failedAfter=2026-12-06T00:00:00Z", "failedAfter"}, {"group=" + first, "group"},
		{"after=x", "after"},
	} {
		p := problemOf(t, h.do(req{method: "GET", path: "/v1/parked/groups?" + tc.query}), http.StatusBadRequest)
		if p.Field != tc.field {
			t.Errorf("%s: field %q, want %q", tc.query, p.Field, tc.field)
		}
	}
	problemOf(t, h.do(req{method: "GET", path: "/v1/parked/groups?subscription=ShipmentNotifier.nope"}), http.StatusNotFound)
}
