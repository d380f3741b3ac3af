package tests

import (
	"fmt"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"strings"
	"testing"
	"time"
)

// berthIn runs the built binary against h with stdin, and returns its
// stdout, stderr and exit code.
func (h *hostProc) berthIn(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	return berthWith(t, nil, stdin, append([]string{"--server", h.URL}, args...)...)
}

// TestTheMorningFromTheCLI: the operator's morning from one CLI command. A
// filtered list (exported as JSON lines) shows what is parked; `berth jobs
// resume` shows the dry run's count and a sample, and asks for the count
// before it changes anything; typed, the job runs and --wait follows it to
// the end; the audit log and the resolved records say who did it and why.
func TestTheMorningFromTheCLI(t *testing.T) {
	const n = 12
	svc := newNotifier(t)
	h := newHost(t, hostConfig{NotifyURL: svc.URL(), Extra: fastRetry + "\n[jobs]\ndefault-rate = 50.0\n"})
	h.uploadNotifier(t, 201)
	svc.set("ghost", behaviour{Unknown: true})
	for i := range n {
		h.appendShipped(t, fmt.Sprintf("o-%02d", i), "ghost")
	}
	checkfor.Within(t, 30*time.Second, func() error { return parkedWaiting(h.subscription(t), n) })

	out, errOut, code := h.berthIn(t, "", "parked", "list", "--class", "Notification", "--message", "GHOST", "--ndjson", "--limit", "5")
	if code != 0 || strings.Count(out, "\n") != 5 || !strings.HasPrefix(out, `{"subscription":`) {
		t.Fatalf("parked list --ndjson --limit 5: exit %d, %d lines:\n%s%s", code, strings.Count(out, "\n"), out, errOut)
	}
	out, _, _ = h.berthIn(t, "", "parked", "list", "--class", "Notification", "--ndjson")
	if strings.Count(out, "\n") != n {
		t.Errorf("parked list --ndjson (every page): %d lines, want %d", strings.Count(out, "\n"), n)
	}
	if _, errOut, code := h.berthIn(t, "", "parked", "list", "--failed-after", "yesterday"); code != 2 || !strings.Contains(errOut, "RFC 3339") {
		t.Errorf("a bad --failed-after: exit %d, %s", code, errOut)
	}

	// Without --reason: refused at once.
	if _, errOut, code := h.berthIn(t, "", "jobs", "resume", "--class", "UnknownBuyer"); code != 2 || !strings.Contains(errOut, "--reason is required") {
		t.Errorf("jobs resume without a reason: exit %d, %s", code, errOut)
	}
	// Not confirmed (a wrong count typed): nothing changes.
	out, errOut, code = h.berthIn(t, "yes\n", "jobs", "resume", "--class", "UnknownBuyer", "--reason", "ghost imported")
	if code != 2 || !strings.Contains(out, "12 parked aggregate(s) match class UnknownBuyer") || !strings.Contains(errOut, "Type 12 to confirm") ||
		!strings.Contains(errOut, "not confirmed: nothing was changed") {
		t.Fatalf("unconfirmed jobs resume: exit %d\n%s\n%s", code, out, errOut)
	}
	if strings.Contains(h.cli(t, "jobs", "list"), "resume") {
		t.Fatal("an unconfirmed bulk resume created a job")
	}
	svc.set("ghost", behaviour{})
	out, errOut, code = h.berthIn(t, "12\n", "jobs", "resume", "--class", "UnknownBuyer", "--reason", "ghost imported", "--wait")
	if code != 0 || !strings.Contains(out, "state") || !strings.Contains(out, "12 of 12 matched: 12 done, 0 failed") {
		t.Fatalf("confirmed jobs resume --wait: exit %d\n%s\n%s", code, out, errOut)
	}
	for i := range n {
		svc.waitNotified(t, key(fmt.Sprintf("o-%02d", i), 1), 20*time.Second)
	}
	if list := h.cli(t, "jobs", "list"); !strings.Contains(list, "done") || !strings.Contains(list, "12/12") || !strings.Contains(list, "ghost imported") {
		t.Errorf("jobs list:\n%s", list)
	}
	if audit := h.cli(t, "audit", "--wide"); !strings.Contains(audit, "POST /v1/jobs") || !strings.Contains(audit, "job 1: resume of 12 matched") {
		t.Errorf("audit:\n%s", audit)
	}
	checkfor.Within(t, 20*time.Second, func() error { return h.noneParked(t) })
	if res := h.cli(t, "parked", "resolved", subName, "--wide"); strings.Count(res, "ghost imported") != n {
		t.Errorf("parked resolved: want %d rows resumed for \"ghost imported\":\n%s", n, res)
	}
	if vs := h.cli(t, "modules", "versions", moduleName); !strings.Contains(vs, "v1") || !strings.Contains(vs, "current") {
		t.Errorf("modules versions:\n%s", vs)
	}
}
