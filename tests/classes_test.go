package tests

import (
	"encoding/json"
	"fmt"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"mime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/berthhq/berth/internal/testing/testbuild"
	"github.com/berthhq/berth/retry"
)

// Built on first use.
var (
	classTreeWasm     = sync.OnceValues(func() ([]byte, error) { return testbuild.Bytes("samples/class-tree") })
	unknownParentWasm = sync.OnceValues(func() ([]byte, error) { return testbuild.Bytes("samples/bad-class-tree/unknown-parent") })
	cycleWasm         = sync.OnceValues(func() ([]byte, error) { return testbuild.Bytes("samples/bad-class-tree/cycle") })
)

func built(t *testing.T, build func() ([]byte, error)) []byte {
	t.Helper()
	b, err := build()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const classTreeSub = "ClassTree.onFail"

// classRecord is the part of a parked record these tests read, as REST
// shows it.
type classRecord struct {
	Error struct {
		Classes    []string `json:"classes"`
		Message    string   `json:"message"`
		Kind       string   `json:"kind"`
		Class      string   `json:"class"`
		Reason     string   `json:"reason"`
		Undeclared []string `json:"undeclared"`
	} `json:"error"`
	Attempts   int        `json:"attempts"`
	State      string     `json:"state"`
	NextRetry  *time.Time `json:"nextRetry"`
	WaitReason string     `json:"waitReason"`
}

// appendFail appends a Fail event to Job/id with the payload.
func (h *hostProc) appendFail(t *testing.T, id string, payload map[string]string) {
	t.Helper()
	h.must(201, "POST", "/v1/events", map[string]any{
		"aggregateType": "Job", "aggregateId": id,
		"events": []map[string]any{{"type": "Fail", "data": payload}},
	})
}

func (h *hostProc) waitJobParked(t *testing.T, id string) (classRecord, string) {
	t.Helper()
	var rec classRecord
	var raw string
	checkfor.Within(t, 20*time.Second, func() error {
		path := "/v1/subscriptions/" + classTreeSub + "/parked/Job/" + id
		r := h.request("GET", path, nil)
		if r.Status != 200 {
			return fmt.Errorf("GET %s: %s", path, r)
		}
		r.JSON(t, &rec)
		raw = string(r.Body)
		return nil
	})
	return rec, raw
}

// The module declares Fatal (unrecoverable) and FatalLeaf under Fatal; a
// failure sent with a chain naming only FatalLeaf is a Fatal by the declared
// tree, so it parks after 1 attempt and waits for an operator. A class the
// module does not declare is classified by the chain as sent (recoverable:
// its budget is spent, 3 attempts) and recorded as undeclared. Invalid UTF-8
// in a result's class or message is an invalid result (berth.Trap), and
// nothing of the bad bytes is stored as is.
func TestDeclaredClassTreeThroughHost(t *testing.T) {
	// Four aggregates fail at once on purpose: not an outage.
	h := newHost(t, hostConfig{Extra: "[subscription.systemic]\naggregates = 100\n"})
	h.must(201, "PUT", "/v1/modules/class-tree", built(t, classTreeWasm), "Content-Type", "application/wasm")

	h.appendFail(t, "leaf", map[string]string{"class": "FatalLeaf", "message": "a fatal leaf"})
	h.appendFail(t, "stranger", map[string]string{"class": "Stranger", "message": "not declared"})
	h.appendFail(t, "bad-class", map[string]string{"class": "FatalLeaf", "badUTF8": "class"})
	h.appendFail(t, "bad-message", map[string]string{"class": "FatalLeaf", "message": "oops", "badUTF8": "message"})

	leaf, raw := h.waitJobParked(t, "leaf")
	if leaf.Attempts != 1 || !slices.Equal(leaf.Error.Classes, []string{"FatalLeaf", "Fatal"}) || leaf.Error.Class != "unrecoverable" ||
		leaf.Error.Reason != "handler unrecoverable: Fatal" || len(leaf.Error.Undeclared) != 0 {
		t.Errorf("FatalLeaf: %s; want parked after 1 attempt as unrecoverable by its declared parent Fatal", raw)
	}
	if leaf.State != "waiting" || leaf.WaitReason != "unrecoverable" || leaf.NextRetry != nil {
		t.Errorf("FatalLeaf: %s; want waiting for an operator, no next retry", raw)
	}

	stranger, raw := h.waitJobParked(t, "stranger")
	if stranger.Attempts != 3 || !slices.Equal(stranger.Error.Classes, []string{"Stranger"}) || stranger.Error.Class != "recoverable" ||
		!slices.Equal(stranger.Error.Undeclared, []string{"Stranger"}) {
		t.Errorf("Stranger: %s; want 3 attempts, recoverable, recorded as undeclared", raw)
	}
	if stranger.State != "retrying" || stranger.NextRetry == nil {
		t.Errorf("Stranger: %s; a spent budget keeps its long-horizon schedule", raw)
	}

	for _, tc := range []struct{ id, want string }{
		{"bad-class", `failure class 1 "FatalLeaf\xff" is not valid UTF-8`},
		{"bad-message", `failure message "oops\xfe\xff" is not valid UTF-8`},
	} {
		rec, raw := h.waitJobParked(t, tc.id)
		if rec.Attempts != 3 || !slices.Equal(rec.Error.Classes, []string{retry.ClassTrap}) || rec.Error.Kind != "trap" ||
			!strings.Contains(rec.Error.Message, "result that does not decode") || !strings.Contains(rec.Error.Message, tc.want) {
			t.Errorf("%s: %s; want an invalid result (berth.Trap, 3 attempts) whose message says %s", tc.id, raw, tc.want)
		}
		if !utf8.ValidString(raw) || strings.Contains(raw, "\ufffd") {
			t.Errorf("%s: the record holds the guest's bad bytes: %q", tc.id, raw)
		}
	}
}

// A describe whose class tree names an unknown parent or has a cycle is
// refused at upload with a problem naming the class, and nothing is stored.
func TestUploadRefusesBadClassTree(t *testing.T) {
	h := newHost(t, hostConfig{})
	for _, tc := range []struct {
		name string
		wasm []byte
		want string
	}{
		{"unknown-parent", built(t, unknownParentWasm), "error class FatalLeaf has unknown parent Fatal"},
		{"cycle", built(t, cycleWasm), "error class A is its own ancestor (A -> B -> A)"},
	} {
		r := h.request("PUT", "/v1/modules/"+tc.name, tc.wasm, "Content-Type", "application/wasm")
		if r.Status != 400 {
			t.Errorf("%s: %s, want 400", tc.name, r)
			continue
		}
		if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/problem+json" {
			t.Errorf("%s: Content-Type %q", tc.name, r.Header.Get("Content-Type"))
		}
		var p struct {
			Status int    `json:"status"`
			Detail string `json:"detail"`
		}
		if err := json.Unmarshal(r.Body, &p); err != nil || p.Status != 400 || !strings.Contains(p.Detail, tc.want) {
			t.Errorf("%s: problem %s (%v); want its detail to say %q", tc.name, r.Body, err, tc.want)
		}
		if g := h.request("GET", "/v1/modules/"+tc.name, nil); g.Status != 404 {
			t.Errorf("%s: stored after a refused upload: %s", tc.name, g)
		}
	}
	var list struct {
		Modules []any `json:"modules"`
	}
	h.must(200, "GET", "/v1/modules", nil).JSON(t, &list)
	if len(list.Modules) != 0 {
		t.Errorf("modules after refused uploads: %+v", list.Modules)
	}
}
