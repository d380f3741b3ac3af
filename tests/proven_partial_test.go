package tests

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/checkfor"
)

// fixedNotifier returns the fix's file (fixedNotifierWasm), its bytes and
// their SHA-256 in hex.
func fixedNotifier(t testing.TB) (path string, wasm []byte, sha string) {
	t.Helper()
	path, err := fixedNotifierWasm()
	if err != nil {
		t.Fatal(err)
	}
	if wasm, err = os.ReadFile(path); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(wasm)
	return path, wasm, hex.EncodeToString(sum[:])
}

// TestProvenResumeOfNinetyPercent: a fix that handles 90 % of a group
// leaves exactly the other 10 % parked after the proven resume. The group
// is 50 unknown buyers; 5 of the orders carry a payload past the
// capsule's size cap (capsule.max-bytes), so their capsules keep the
// event but none of its host calls, and the fix's replay departs from
// them: no proof either way. The replay says 45 handled (90 %) and 5
// departed; once the fix is deployed, the proven job resumes those 45,
// and the 5 stay parked, by id.
func TestProvenResumeOfNinetyPercent(t *testing.T) {
	const handled, big = 45, 5
	fix, fixBytes, fixSHA := fixedNotifier(t)
	svc := newNotifier(t)
	h := newHost(t, hostConfig{NotifyURL: svc.URL(), Extra: groupsConfig + "\n[capsule]\nmax-bytes = \"8KiB\"\n"})
	h.uploadNotifier(t, 201)
	for i := range handled + big {
		svc.set(fmt.Sprintf("ghost-%d", i), behaviour{Unknown: true})
	}
	h.appendShippedMany(t, "o-ghost-%d", handled, "ghost-0")
	var bigIDs []string
	for i := range big {
		id := fmt.Sprintf("o-big-%d", i)
		bigIDs = append(bigIDs, id)
		h.must(201, "POST", "/v1/events", map[string]any{
			"aggregateType": "Order", "aggregateId": id, "ownerId": fmt.Sprintf("ghost-%d", handled+i),
			"events": []map[string]any{{"type": "OrderShipped", "data": map[string]string{"carrier": "DHL", "lines": strings.Repeat("x", 16<<10)}}},
		})
	}
	checkfor.Within(t, 30*time.Second, func() error { return groupsAre(h.groups(t), handled+big) })
	group := h.groups(t)[0].Group

	out, errOut, code := h.berthIn(t, "", "parked", "replay", "--group", group, "--module", fix, "--json")
	var rep groupReplay
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 1 || rep.Replayed != handled+big || rep.Handled != handled ||
		rep.Departed != big || rep.StillFailing != 0 || !rep.Kept {
		t.Fatalf("the fix on the group: exit %d, %+v\n%s%s", code, rep, out, errOut)
	}
	out, _, _ = h.berthIn(t, "", "parked", "replay", "--group", group, "--module", fix)
	if !strings.Contains(out, "45 (90.0 %)") || !strings.Contains(out, "5 (10.0 %)") {
		t.Errorf("the text of the group's replay:\n%s", out)
	}

	h.must(200, "PUT", "/v1/modules/"+moduleName, fixBytes, "Content-Type", "application/wasm")
	out, errOut, code = h.berthIn(t, "", "jobs", "resume", "--group", group, "--proven-by", moduleName+":"+fixSHA,
		"--reason", "fixed", "--yes", "--wait")
	if code != 0 || !strings.Contains(out, fmt.Sprintf("%d of %d matched: %d done", handled, handled, handled)) {
		t.Fatalf("the proven resume: exit %d\n%s%s", code, out, errOut)
	}
	checkfor.Within(t, 30*time.Second, func() error {
		if err := groupsAre(h.groups(t), big); err != nil {
			return err
		}
		var page struct {
			Records []parkedRecord `json:"records"`
		}
		h.must(200, "GET", "/v1/parked?group="+group, nil).JSON(t, &page)
		var ids []string
		for _, r := range page.Records {
			ids = append(ids, r.AggregateID)
		}
		if slices.Sort(ids); !slices.Equal(ids, bigIDs) {
			return fmt.Errorf("parked %v, want %v", ids, bigIDs)
		}
		return nil
	})
}

// TestProvenJobStopsWhenTheFixIsRolledBack: a proven job acts only while
// its candidate is the version deployed. Started once the fix is
// deployed, at one aggregate a second, it stops when the old version is
// pushed back: cancelled by the host, its stopped reason saying
// not-deployed, what it resumed staying resumed and the rest parked.
func TestProvenJobStopsWhenTheFixIsRolledBack(t *testing.T) {
	const ghosts = 20 // 20 s of the job at 1/s: room for the rollback
	fix, fixBytes, fixSHA := fixedNotifier(t)
	svc := newNotifier(t)
	h := newHost(t, hostConfig{NotifyURL: svc.URL(), Extra: groupsConfig})
	h.uploadNotifier(t, 201)
	setCauses(svc, ghosts, 0, 0)
	h.appendShippedMany(t, "o-ghost-%d", ghosts, "ghost-0")
	checkfor.Within(t, 30*time.Second, func() error { return groupsAre(h.groups(t), ghosts) })
	group := h.groups(t)[0].Group
	if out, errOut, code := h.berthIn(t, "", "parked", "replay", "--group", group, "--module", fix); code != 0 {
		t.Fatalf("the fix on the group: exit %d\n%s%s", code, out, errOut)
	}
	h.must(200, "PUT", "/v1/modules/"+moduleName, fixBytes, "Content-Type", "application/wasm")
	var j struct {
		ID      uint64 `json:"id"`
		State   string `json:"state"`
		Done    int    `json:"done"`
		Stopped string `json:"stopped"`
	}
	h.must(201, "POST", "/v1/jobs", map[string]any{"action": "resume", "reason": "fixed", "rate": 1,
		"filter": map[string]any{"group": group, "proven": map[string]string{"module": moduleName, "sha256": fixSHA}}}).JSON(t, &j)
	id := j.ID
	get := func() {
		h.must(200, "GET", fmt.Sprintf("/v1/jobs/%d", id), nil).JSON(t, &j)
	}
	checkfor.Within(t, 20*time.Second, func() error {
		if get(); j.Done < 1 {
			return fmt.Errorf("job %s, %d done", j.State, j.Done)
		}
		return nil
	})
	h.uploadNotifier(t, 200) // the old version, back
	checkfor.Within(t, 20*time.Second, func() error {
		if get(); j.State == "running" {
			return fmt.Errorf("job running, %d done", j.Done)
		}
		return nil
	})
	if j.State != "cancelled" || j.Done < 1 || j.Done >= ghosts || !strings.HasPrefix(j.Stopped, "not-deployed: module "+moduleName+" is now sha256 ") {
		t.Fatalf("the job after the rollback: %+v", j)
	}
	if err := groupsAre(h.groups(t), ghosts-j.Done); err != nil {
		t.Errorf("after the stop, %d resumed: %v", j.Done, err)
	}
	out, _, _ := h.berthIn(t, "", "jobs", "show", strconv.FormatUint(id, 10))
	if !strings.Contains(out, "stopped") || !strings.Contains(out, "not-deployed") {
		t.Errorf("berth jobs show:\n%s", out)
	}
}
