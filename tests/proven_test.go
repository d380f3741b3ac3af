package tests

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/checkfor"
)

// groupReplay is what `berth parked replay --group --json` prints.
type groupReplay struct {
	Replayed     int     `json:"replayed"`
	Handled      int     `json:"handled"`
	StillFailing int     `json:"stillFailing"`
	Departed     int     `json:"departed"`
	Module       string  `json:"module"`
	SHA256       string  `json:"sha256"`
	Kept         bool    `json:"kept"`
	FetchSecs    float64 `json:"fetchSeconds"`
	ReplaySecs   float64 `json:"replaySeconds"`
	Failing      []struct {
		Message string `json:"message"`
		Count   int    `json:"count"`
	} `json:"failing"`
}

// TestProvenResume is the on-call's four commands on the built host: the
// groups of an incident (unknown buyers, a service answering 503); a fix
// that passes unknown buyers over, replayed on each group, handles the
// first whole and none of the second, which still fails for one cause; a
// job proven by the fix is refused until the fix is deployed, then resumes
// exactly the aggregates the replay handled — those parked after the
// replay stay parked, as does the other group — and its audit entry names
// the proof.
func TestProvenResume(t *testing.T) {
	const ghosts, later, down = 40, 5, 10
	fix, fixBytes, fixSHA := fixedNotifier(t)
	svc := newNotifier(t)
	h := newHost(t, hostConfig{NotifyURL: svc.URL(), Extra: groupsConfig})
	h.uploadNotifier(t, 201)
	for i := range ghosts + later {
		svc.set(fmt.Sprintf("ghost-%d", i), behaviour{Unknown: true})
	}
	for i := range down {
		svc.set(fmt.Sprintf("down-%d", i), behaviour{Fail: 1 << 30})
	}
	h.appendShippedMany(t, "o-ghost-%d", ghosts, "ghost-0")
	for i := range down {
		h.appendShipped(t, fmt.Sprintf("o-down-%d", i), fmt.Sprintf("down-%d", i))
	}
	checkfor.Within(t, 30*time.Second, func() error { return groupsAre(h.groups(t), ghosts, down) })
	gs := h.groups(t)

	replay := func(group string) (groupReplay, int) {
		out, errOut, code := h.berthIn(t, "", "parked", "replay", "--group", group, "--module", fix, "--json")
		var rep groupReplay
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("replay --group %s: exit %d\n%s%s", group, code, out, errOut)
		}
		return rep, code
	}
	rep, code := replay(gs[0].Group)
	if code != 0 || rep.Replayed != ghosts || rep.Handled != ghosts || rep.StillFailing != 0 || rep.Departed != 0 || !rep.Kept ||
		rep.SHA256 != fixSHA {
		t.Fatalf("the fix on the unknown buyers: exit %d, %+v", code, rep)
	}
	rep, code = replay(gs[1].Group)
	if code != 1 || rep.Handled != 0 || rep.StillFailing != down || len(rep.Failing) != 1 ||
		rep.Failing[0].Message != "the notification service answered {}: Service Unavailable" {
		t.Errorf("the fix on the 503s: exit %d, %+v", code, rep)
	}
	out, _, _ := h.berthIn(t, "", "parked", "replay", "--group", gs[1].Group, "--module", fix)
	if !strings.Contains(out, "handled") || !strings.Contains(out, "0 (0.0 %)") || !strings.Contains(out, "10 (100.0 %)") {
		t.Errorf("the text of a group's replay:\n%s", out)
	}

	// More of the first cause park after the replay: not proven.
	for i := range later {
		buyer := fmt.Sprintf("ghost-%d", ghosts+i)
		h.appendShipped(t, "o-"+buyer, buyer)
	}
	checkfor.Within(t, 30*time.Second, func() error { return groupsAre(h.groups(t), ghosts+later, down) })

	proven := moduleName + ":" + fixSHA
	if _, errOut, code := h.berthIn(t, "", "jobs", "resume", "--group", gs[0].Group, "--proven-by", proven, "--reason", "fixed", "--yes"); code == 0 ||
		!strings.Contains(errOut, "not the module version deployed") {
		t.Errorf("a proven job before the fix is deployed: exit %d, %s", code, errOut)
	}
	h.must(200, "PUT", "/v1/modules/"+moduleName, fixBytes, "Content-Type", "application/wasm")
	out, errOut, code := h.berthIn(t, "", "jobs", "resume", "--group", gs[0].Group, "--proven-by", proven, "--reason", "fixed", "--yes", "--wait")
	if code != 0 || !strings.Contains(out, fmt.Sprintf("%d of %d matched: %d done", ghosts, ghosts, ghosts)) {
		t.Fatalf("the proven resume: exit %d\n%s%s", code, out, errOut)
	}
	// Exactly the unproven stay parked: the later ones, and the 503s.
	checkfor.Within(t, 30*time.Second, func() error { return groupsAre(h.groups(t), down, later) })
	var audit struct {
		Entries []auditEntry `json:"entries"`
	}
	h.must(200, "GET", "/v1/audit?limit=1000", nil).JSON(t, &audit)
	named := false
	for _, e := range audit.Entries {
		named = named || strings.Contains(fmt.Sprint(e), "proven by "+moduleName+" sha256 "+fixSHA)
	}
	if !named {
		t.Errorf("no audit entry names the proof: %+v", audit.Entries)
	}
}
