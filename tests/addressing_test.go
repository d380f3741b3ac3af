package tests

import (
	"encoding/json"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"net/url"
	"strings"
	"testing"
	"time"
)

// oddIDs are aggregate ids that can be appended, so must be addressable
// everywhere: ids that differ only by how they would be escaped or decoded,
// and ids holding what a URL gives meaning to.
var oddIDs = []string{
	"a/b", "a%2Fb", "a%252Fb", "%2E%2E", "%2e", "...", "a/..", "../a", "%", "x:y@z", "q?x=1#frag",
	"sp ace", "plus+sign", "ünï/cødé", "~!$&'()*,=;",
}

// cli runs the built binary's operator verbs against h and returns its
// standard output, standard error and exit code.
func cli(t *testing.T, h *hostProc, args ...string) (string, string, int) {
	t.Helper()
	return berth(t, nil, append([]string{"--server", h.URL}, args...)...)
}

// parkedPath is the REST path of the record of Order id.
func parkedPath(id string) string {
	return "/v1/subscriptions/" + url.PathEscape(subName) + "/parked/Order/" + url.PathEscape(id)
}

// TestOddIDsEverywhere appends and parks an aggregate for each odd id, with
// the REST API and the CLI, and reaches each on every route — its events,
// its record, resume and skip — through REST and through the built binary's
// operator verbs; every action reaches its own aggregate and no other. Ids
// that no browser URL can name are refused at append, naming the rule.
func TestOddIDsEverywhere(t *testing.T) {
	svc := newNotifier(t)
	h := newHost(t, hostConfig{NotifyURL: svc.URL(), Extra: fastRetry})
	h.uploadNotifier(t, 201)
	svc.set("ghost", behaviour{Unknown: true})
	for i, id := range oddIDs {
		if i%2 == 0 {
			h.appendShipped(t, id, "ghost")
			continue
		}
		if out, errOut, code := cli(t, h, "events", "append", "--type", "Order", "--id", id, "--owner", "ghost", `OrderShipped={"carrier":"DHL"}`); code != 0 {
			t.Fatalf("host events append --id %q: exit %d\n%s%s", id, code, out, errOut)
		}
	}
	records := map[string]string{} // id -> its record as first parked
	for _, id := range oddIDs {
		checkfor.Within(t, 20*time.Second, func() error { return h.answers(parkedPath(id), 200) })
		records[id] = string(h.must(200, "GET", parkedPath(id), nil).Body)
	}
	svc.set("ghost", behaviour{})

	for i, id := range oddIDs {
		// Its events, over REST.
		var ev struct {
			Commits []struct {
				AggregateID string `json:"aggregateId"`
			} `json:"commits"`
		}
		h.must(200, "GET", "/v1/aggregates/Order/"+url.PathEscape(id)+"/events", nil).JSON(t, &ev)
		if len(ev.Commits) != 1 || ev.Commits[0].AggregateID != id {
			t.Errorf("events of %q: %+v", id, ev.Commits)
		}
		// Its record, with the CLI.
		out, errOut, code := cli(t, h, "--json", "parked", "show", subName, "Order", id)
		var rec parkedRecord
		if code != 0 || json.Unmarshal([]byte(out), &rec) != nil || rec.AggregateID != id {
			t.Errorf("host parked show %q: exit %d, record %+v\n%s%s", id, code, rec, out, errOut)
		}
		if out, _, _ := cli(t, h, "parked", "show", subName, "Order", id); !strings.Contains(out, "Order/"+id) {
			t.Errorf("host parked show %q does not show the aggregate:\n%s", id, out)
		}
		// Skip or resume it, with the CLI or over REST.
		action := []string{"skip", "resume"}[i%2]
		if i%4 < 2 {
			if out, errOut, code := cli(t, h, "parked", action, subName, "Order", id, "--reason", "odd id"); code != 0 {
				t.Errorf("host parked %s %q: exit %d\n%s%s", action, id, code, out, errOut)
			}
		} else {
			h.must(202, "POST", parkedPath(id)+"/"+action, map[string]string{"reason": "odd id"})
		}
		checkfor.Within(t, 20*time.Second, func() error {
			return h.answers(parkedPath(id), 404)
		})
		if action == "resume" {
			svc.waitNotified(t, key(id, 1), 20*time.Second)
		}
		// No other aggregate was touched.
		for _, other := range oddIDs[i+1:] {
			if got := string(h.must(200, "GET", parkedPath(other), nil).Body); got != records[other] {
				t.Fatalf("%s of %q changed the record of %q:\nbefore %s\nafter  %s", action, id, other, records[other], got)
			}
		}
	}
	for i, id := range oddIDs {
		if n := svc.notified(key(id, 1)); (i%2 == 1) != (n == 1) {
			t.Errorf("%q notified %d times after a %s", id, n, []string{"skip", "resume"}[i%2])
		}
	}

	// Control characters are addressable too (percent-encoded), though an
	// operator's terminal shows them blanked: show them as JSON, skip them.
	ctrl := []string{"new\nline", "tab\tand\x7fdel"}
	svc.set("ghost", behaviour{Unknown: true})
	for _, id := range ctrl {
		h.appendShipped(t, id, "ghost")
		checkfor.Within(t, 20*time.Second, func() error { return h.answers(parkedPath(id), 200) })
		out, errOut, code := cli(t, h, "--json", "parked", "show", subName, "Order", id)
		var rec parkedRecord
		if code != 0 || json.Unmarshal([]byte(out), &rec) != nil || rec.AggregateID != id {
			t.Errorf("host parked show %q: exit %d, record %+v\n%s%s", id, code, rec, out, errOut)
		}
	}
	if out, errOut, code := cli(t, h, "parked", "skip", subName, "Order", ctrl[0]); code != 0 {
		t.Errorf("host parked skip %q: exit %d\n%s%s", ctrl[0], code, out, errOut)
	}
	h.must(202, "POST", parkedPath(ctrl[1])+"/skip", nil)
	for _, id := range ctrl {
		checkfor.Within(t, 20*time.Second, func() error {
			return h.answers(parkedPath(id), 404)
		})
	}

	// Names no client can address are refused at append, with the rule.
	for _, bad := range [][2]string{{"Order", ".."}, {"Order", "."}, {"..", "o-1"}, {".", "o-1"}, {"Order", "a\x00b"}} {
		r := h.must(400, "POST", "/v1/events", map[string]any{"aggregateType": bad[0], "aggregateId": bad[1],
			"events": []map[string]any{{"type": "OrderShipped"}}})
		var p problemDoc
		r.JSON(t, &p)
		rule := `must not be "." or ".."`
		if strings.Contains(bad[1], "\x00") {
			rule = "must not hold NUL"
		}
		if !strings.Contains(p.Detail, rule) || (p.Field != "aggregateId" && p.Field != "aggregateType") {
			t.Errorf("append %q/%q: %+v, want the rule and the field", bad[0], bad[1], p)
		}
		if strings.Contains(bad[1], "\x00") {
			continue // no command line carries it
		}
		if _, errOut, code := cli(t, h, "events", "append", "--type", bad[0], "--id", bad[1], "OrderShipped"); code != 1 || !strings.Contains(errOut, rule) {
			t.Errorf("host events append %s/%s: exit %d, %s; want exit 1 naming the rule", bad[0], bad[1], code, errOut)
		}
	}
	if st := h.subscription(t); st.Head != uint64(len(oddIDs)+len(ctrl)) {
		t.Errorf("head %d, want %d: a refused append was stored", st.Head, len(oddIDs)+len(ctrl))
	}
}
