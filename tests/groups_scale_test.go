package tests

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/ledger"
)

// TestThirtyThousandParksReadAsThreeGroups is the incident: three
// causes among 30,000 parks — unknown buyers of varied ids, a service
// answering 503, one too slow — read as exactly three groups with exact
// counts, through the built host, also after a SIGKILL. Parking 30,000
// through the engine takes 20–60 s on a shared machine (BenchmarkParkStorm:
// ~1,000–1,500 parks/s), too long for a test: the host parks a few of each
// cause itself, is stopped, and the rest are written into its ledger as
// copies of its own records (varied ids in the unknown buyers' messages),
// as TestHundredThousandParked fills its ledger; then the host parks one
// more of each cause, which joins its group.
func TestThirtyThousandParksReadAsThreeGroups(t *testing.T) {
	const ghosts, down, slow = 27_000, 2_700, 300 // 30,000
	const seen = 5                                // parked by the host, of each cause but the slow
	svc := newNotifier(t)
	h := newHost(t, hostConfig{NotifyURL: svc.URL(), Extra: groupsConfig})
	h.uploadNotifier(t, 201)
	setCauses(svc, ghosts+1, down+1, slow+1)
	for i := range seen {
		h.appendShipped(t, fmt.Sprintf("o-ghost-%d", i), fmt.Sprintf("ghost-%d", i))
		h.appendShipped(t, fmt.Sprintf("o-down-%d", i), fmt.Sprintf("down-%d", i))
	}
	h.appendShipped(t, "o-slow-0", "slow-0")
	checkfor.Within(t, 30*time.Second, func() error { return groupsAre(h.groups(t), seen, seen, 1) })
	h.Stop()

	start := time.Now()
	copies := func(cause string, from, to int, idInMessage bool) {
		proto := fmt.Sprintf("%s-0", cause)
		copyParkedAs(t, h.Data, "o-"+proto, false, from, to, func(r *ledger.Record, i int) {
			buyer := fmt.Sprintf("%s-%d", cause, i)
			r.AggregateID = "o-" + buyer
			if idInMessage {
				r.Error.Message = strings.Replace(r.Error.Message, proto, buyer, 1)
			}
		})
	}
	copies("ghost", seen, ghosts, true)
	copies("down", seen, down, false)
	copies("slow", 1, slow, false)
	t.Logf("wrote %d parked records in %v", ghosts+down+slow-2*seen-1, time.Since(start).Round(time.Millisecond))

	h = h.restart(t)
	if err := groupsAre(h.groups(t), ghosts, down, slow); err != nil {
		t.Fatal(err)
	}
	gs := h.groups(t)
	if gs[0].Message != "the notification service does not know buyer {}" || gs[2].Classes[0] != "berth.Timeout" {
		t.Errorf("groups %+v", gs)
	}
	out, errOut, code := h.berthIn(t, "", "parked", "groups", "--subscription", subName)
	for _, n := range []string{" 27000 ", " 2700 ", " 300 "} {
		if code != 0 || !strings.Contains(out, n) {
			t.Errorf("berth parked groups: exit %d, want %q in\n%s%s", code, n, out, errOut)
		}
	}

	// One more of each cause, parked by the host, joins its group; a
	// SIGKILL loses nothing of it.
	h.appendShipped(t, fmt.Sprintf("o-ghost-%d", ghosts), fmt.Sprintf("ghost-%d", ghosts))
	h.appendShipped(t, fmt.Sprintf("o-down-%d", down), fmt.Sprintf("down-%d", down))
	h.appendShipped(t, fmt.Sprintf("o-slow-%d", slow), fmt.Sprintf("slow-%d", slow))
	checkfor.Within(t, 30*time.Second, func() error { return groupsAre(h.groups(t), ghosts+1, down+1, slow+1) })
	h.Kill()
	h = h.restart(t)
	if err := groupsAre(h.groups(t), ghosts+1, down+1, slow+1); err != nil {
		t.Fatalf("after a SIGKILL: %v", err)
	}
}
