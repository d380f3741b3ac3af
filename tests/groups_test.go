package tests

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/checkfor"
)

// groupsConfig parks at once on each of the three causes of
// TestFailureGroups: an unknown buyer (404), a notification service that
// answers 503, and one that answers past the attempt's timeout. The
// module is compiled before it runs, so that no attempt times out on the
// interpreter; the timeout, 2 s, leaves a loaded machine room to answer
// the 404s and 503s (a call waits for an instance within it), and the
// slow service answers after 5 s.
const groupsConfig = `
[sandbox]
tier-up = false

[subscriptions."ShipmentNotifier.onOrderShipped".retry]
timeout = "2s"
unrecoverable = ["Notification", "berth.Timeout"]
`

// parkedGroup is a failure group as GET /v1/parked/groups lists it.
type parkedGroup struct {
	Group   string         `json:"group"`
	Message string         `json:"message"`
	Classes []string       `json:"classes"`
	Count   int            `json:"count"`
	Modules map[string]int `json:"modules"`
}

func (h *hostProc) groups(t testing.TB) []parkedGroup {
	t.Helper()
	var page struct {
		Groups []parkedGroup `json:"groups"`
	}
	h.must(200, "GET", "/v1/parked/groups?subscription="+subName, nil).JSON(t, &page)
	return page.Groups
}

// groupsAre reports how groups differ from the counts want, biggest first.
func groupsAre(gs []parkedGroup, want ...int) error {
	var got []int
	var what []string
	for _, g := range gs {
		got = append(got, g.Count)
		what = append(what, fmt.Sprintf("%d × %v %q", g.Count, g.Classes, g.Message))
	}
	if !slices.Equal(got, want) {
		return fmt.Errorf("groups of %v records, want %v: %s", got, want, strings.Join(what, "; "))
	}
	return nil
}

// TestFailureGroups: on the built host, parks for three causes — unknown
// buyers of varied ids, a service answering 503 and one too slow — read
// as exactly three groups with exact counts, from REST and from `berth
// parked groups`, also after a SIGKILL; a webhook is told group-opened
// once per group and group-grew once at 100, not once a record; a job
// with a group filter skips exactly that group's records.
func TestFailureGroups(t *testing.T) {
	const ghosts, down, slow = 100, 30, 5
	hook := newGroupHook(t)
	svc := newNotifier(t)
	h := newHost(t, hostConfig{NotifyURL: svc.URL(), Extra: groupsConfig + hook.config()})
	h.uploadNotifier(t, 201)
	setCauses(svc, ghosts, down, slow)
	var wg sync.WaitGroup
	for _, c := range []struct {
		buyer string
		n     int
	}{{"ghost-%d", ghosts}, {"down-%d", down}} {
		wg.Go(func() {
			for i := range c.n {
				buyer := fmt.Sprintf(c.buyer, i)
				h.appendShipped(t, "o-"+buyer, buyer)
			}
		})
	}
	wg.Wait()
	checkfor.Within(t, 30*time.Second, func() error { return groupsAre(h.groups(t), ghosts, down) })
	// One slow call at a time: calls that wait for an instance a slow one
	// holds would time out waiting, another cause.
	for i := range slow {
		buyer := fmt.Sprintf("slow-%d", i)
		h.appendShipped(t, "o-"+buyer, buyer)
		h.waitParked(t, "o-"+buyer, 20*time.Second)
	}
	checkfor.Within(t, 10*time.Second, func() error { return groupsAre(h.groups(t), ghosts, down, slow) })
	gs := h.groups(t)
	for i, want := range []string{"the notification service does not know buyer {}",
		"the notification service answered {}: Service Unavailable", ""} {
		if want != "" && gs[i].Message != want {
			t.Errorf("group %d: message %q, want %q", i, gs[i].Message, want)
		}
		if len(gs[i].Modules) != 1 {
			t.Errorf("group %d: modules %v, want one version", i, gs[i].Modules)
		}
	}
	if gs[2].Classes[0] != "berth.Timeout" {
		t.Errorf("the third group's classes %v, want berth.Timeout first", gs[2].Classes)
	}
	out, errOut, code := h.berthIn(t, "", "parked", "groups", "--subscription", subName)
	if code != 0 || strings.Count(out, "\n") != 4 || !strings.Contains(out, gs[0].Group) || !strings.Contains(out, " 100 ") {
		t.Errorf("berth parked groups: exit %d\n%s%s", code, out, errOut)
	}
	wantHeard := []string{"group-opened " + gs[0].Group + " 1", "group-grew " + gs[0].Group + " 100",
		"group-opened " + gs[1].Group + " 1", "group-opened " + gs[2].Group + " 1"}
	checkfor.Within(t, 20*time.Second, func() error {
		if n := len(hook.sorted()); n < len(wantHeard) {
			return fmt.Errorf("the hook heard %v, want %d deliveries", hook.sorted(), len(wantHeard))
		}
		return nil
	})

	h.Kill()
	h = h.restart(t)
	if err := groupsAre(h.groups(t), ghosts, down, slow); err != nil {
		t.Fatalf("after a SIGKILL: %v", err)
	}

	h.must(201, "POST", "/v1/jobs", map[string]any{"action": "skip", "reason": "the service was down",
		"filter": map[string]string{"group": gs[1].Group}})
	checkfor.Within(t, 30*time.Second, func() error { return groupsAre(h.groups(t), ghosts, slow) })
	if st := h.subscription(t); st.Parked["waiting"]+st.Parked["retrying"] != ghosts+slow {
		t.Errorf("after skipping the 503 group: parked %v, want %d", st.Parked, ghosts+slow)
	}

	// Every delivery is in: the ones before the kill, none for the skip.
	hook.waitHeard(t, wantHeard)
}
