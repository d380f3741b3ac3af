package tests

import (
	"github.com/berthhq/berth/internal/testing/checkfor"
	"strings"
	"testing"
	"time"
)

type auditEntry struct {
	Seq    uint64 `json:"seq"`
	Actor  string `json:"actor"`
	Action string `json:"action"`
	Target string `json:"target"`
	Reason string `json:"reason"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
}

// TestAuditAndResolvedHistory: every state-changing call that succeeded is
// in the audit log with its actor (the token's name), target, reason and
// what came of it — refused ones are not, nor appends, which the event log
// records itself — and a resumed aggregate's record
// stays queryable, with who resumed it and why, after it left the ledger.
func TestAuditAndResolvedHistory(t *testing.T) {
	svc := newNotifier(t)
	h := newHost(t, hostConfig{NotifyURL: svc.URL(), Extra: fastRetry + authAndLimits})
	dep, root := *h, *h
	dep.t, dep.token = t, deployerToken
	root.t, root.token = t, adminToken
	dep.uploadNotifier(t, 201)
	svc.set("ghost", behaviour{Unknown: true})
	dep.appendShipped(t, "o/1", "ghost")
	checkfor.Within(t, 20*time.Second, func() error { return root.answers(parkedPath("o/1"), 200) })
	// The record says which module version failed.
	if rec := root.must(200, "GET", parkedPath("o/1"), nil); !strings.Contains(string(rec.Body), `"module":"`+moduleName+` v1"`) {
		t.Errorf("the parked record does not name the module version that failed: %s", rec.Body)
	}
	svc.set("ghost", behaviour{})
	root.must(202, "POST", parkedPath("o/1")+"/resume", map[string]string{"reason": "ghost imported"})
	svc.waitNotified(t, key("o/1", 1), 20*time.Second)
	root.must(200, "POST", "/v1/subscriptions/"+subName+"/pause", nil)
	root.must(200, "POST", "/v1/subscriptions/"+subName+"/unpause", nil)
	root.must(200, "POST", "/v1/config/reload", nil)
	// Refused calls are not audited.
	dep.must(403, "POST", "/v1/subscriptions/"+subName+"/pause", nil)
	root.must(404, "POST", parkedPath("nope")+"/resume", nil)

	var page struct {
		Entries []auditEntry `json:"entries"`
		Next    string       `json:"next"`
	}
	root.must(200, "GET", "/v1/audit?limit=1000", nil).JSON(t, &page)
	want := []struct{ actor, action, target, reason, detail string }{
		{"ci", "PUT /v1/modules/{name}", moduleName, "", "version 1, sha256 "},
		{"root", "POST /v1/subscriptions/{name}/parked/{type}/{id}/resume", subName + "/Order/o/1", "ghost imported", ""},
		{"root", "POST /v1/subscriptions/{name}/pause", subName, "", ""},
		{"root", "POST /v1/subscriptions/{name}/unpause", subName, "", ""},
		{"root", "POST /v1/config/reload", "", "", ""},
	}
	if len(page.Entries) != len(want) {
		t.Fatalf("%d audit entries, want %d: %+v", len(page.Entries), len(want), page.Entries)
	}
	for i, w := range want {
		e := page.Entries[i]
		if e.Actor != w.actor || e.Action != w.action || e.Target != w.target || e.Reason != w.reason ||
			!strings.HasPrefix(e.Detail, w.detail) || e.Status >= 300 || e.Seq != uint64(i+1) {
			t.Errorf("audit entry %d: %+v; want %+v", i+1, e, w)
		}
	}
	// Paging.
	root.must(200, "GET", "/v1/audit?limit=2", nil).JSON(t, &page)
	if len(page.Entries) != 2 || page.Next != "2" {
		t.Errorf("a page of 2: %d entries, next %q", len(page.Entries), page.Next)
	}

	// The resumed aggregate's record, after it left the ledger.
	checkfor.Within(t, 20*time.Second, func() error { return root.answers(parkedPath("o/1"), 404) })
	var resolved struct {
		Records []struct {
			AggregateID string `json:"aggregateId"`
			Attempts    int    `json:"attempts"`
			Error       struct {
				Message string `json:"message"`
			} `json:"error"`
			History []struct {
				Action string `json:"action"`
				Actor  string `json:"actor"`
				Reason string `json:"reason"`
			} `json:"history"`
			ResolvedAt time.Time `json:"resolvedAt"`
		} `json:"records"`
	}
	root.must(200, "GET", "/v1/resolved?subscription="+subName+"&aggregateType=Order&aggregateId=o%2F1", nil).JSON(t, &resolved)
	if len(resolved.Records) != 1 {
		t.Fatalf("%d resolved records of o/1, want 1", len(resolved.Records))
	}
	r := resolved.Records[0]
	found := false
	for _, e := range r.History {
		found = found || (e.Action == "resume" && e.Actor == "root" && e.Reason == "ghost imported")
	}
	if r.AggregateID != "o/1" || r.Attempts != 1 || !strings.Contains(r.Error.Message, "ghost") || !found || r.ResolvedAt.IsZero() {
		t.Errorf("the resolved record: %+v", r)
	}
	if r := root.request("GET", "/v1/resolved?aggregateType=Order", nil); r.Status != 400 {
		t.Errorf("a type without a subscription: %s", r)
	}
}
