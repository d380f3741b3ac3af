package tests

import (
	"encoding/json"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"strings"
	"testing"
	"time"
)

// TestDashIDsThroughTheCLI: through the binary, aggregates whose ids start
// with "-" are appended (--id -1 takes it as the flag's value), shown,
// resumed and skipped with the operator verbs, each id after "--"; the same
// id without "--" is a usage error (exit 2) that says to use it, and
// touches nothing.
func TestDashIDsThroughTheCLI(t *testing.T) {
	svc := newNotifier(t)
	h := newHost(t, hostConfig{NotifyURL: svc.URL(), Extra: fastRetry})
	h.uploadNotifier(t, 201)
	svc.set("ghost", behaviour{Unknown: true})
	ids := []string{"-1", "--", "-x=y"}
	for _, id := range ids {
		if out, errOut, code := cli(t, h, "events", "append", "--type", "Order", "--id", id, "--owner", "ghost", `OrderShipped={"carrier":"DHL"}`); code != 0 {
			t.Fatalf("host events append --id %q: exit %d\n%s%s", id, code, out, errOut)
		}
	}
	for _, id := range ids {
		checkfor.Within(t, 20*time.Second, func() error { return h.answers(parkedPath(id), 200) })
	}
	svc.set("ghost", behaviour{})

	record := string(h.must(200, "GET", parkedPath("-1"), nil).Body)
	if _, errOut, code := cli(t, h, "parked", "resume", subName, "Order", "-1"); code != 2 || !strings.Contains(errOut, `goes after "--"`) {
		t.Errorf("parked resume with -1 before no \"--\": exit %d, stderr %q; want 2 pointing to \"--\"", code, errOut)
	}
	if got := string(h.must(200, "GET", parkedPath("-1"), nil).Body); got != record {
		t.Errorf("a refused command line changed the record of -1:\nbefore %s\nafter  %s", record, got)
	}

	out, errOut, code := cli(t, h, "--json", "parked", "show", subName, "Order", "--", "-1")
	var rec parkedRecord
	if code != 0 || json.Unmarshal([]byte(out), &rec) != nil || rec.AggregateID != "-1" {
		t.Errorf("host parked show -- -1: exit %d, record %+v\n%s%s", code, rec, out, errOut)
	}
	for _, c := range []struct {
		id   string
		args []string
	}{
		{"-1", []string{"parked", "resume", subName, "Order", "--reason", "dash id", "--", "-1"}},
		{"--", []string{"parked", "skip", "--reason", "dash id", subName, "Order", "--", "--"}},
		{"-x=y", []string{"parked", "skip", subName, "--", "Order", "-x=y"}},
	} {
		if out, errOut, code := cli(t, h, c.args...); code != 0 {
			t.Errorf("host %s: exit %d\n%s%s", strings.Join(c.args, " "), code, out, errOut)
			continue
		}
		checkfor.Within(t, 20*time.Second, func() error {
			return h.answers(parkedPath(c.id), 404)
		})
	}
	svc.waitNotified(t, key("-1", 1), 20*time.Second)
}
