package tests

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/api/wire"
)

// TestAnswersAreWireTypes: every JSON answer of the running host is exactly
// a type of package api/wire — it decodes with no field left over and
// encodes back to the same bytes, so the types a client imports describe
// the API whole, whatever the host stores. The CLI, built into the same
// binary, reads those answers with them: the failure's class, what
// classified it, its undeclared classes, why it waits and its invocation key.
func TestAnswersAreWireTypes(t *testing.T) {
	// Two aggregates fail at once on purpose: not an outage.
	h := newHost(t, hostConfig{Extra: "[subscription.systemic]\naggregates = 100\n"})
	h.must(201, "PUT", "/v1/modules/class-tree", built(t, classTreeWasm), "Content-Type", "application/wasm")
	h.appendFail(t, "leaf", map[string]string{"class": "FatalLeaf", "message": "a fatal leaf"})
	h.appendFail(t, "stranger", map[string]string{"class": "Stranger", "message": "not declared"})
	h.waitJobParked(t, "leaf")
	h.waitJobParked(t, "stranger")

	parked := "/v1/subscriptions/" + classTreeSub + "/parked/Job/"
	var leaf, stranger wire.ParkedRecordDetail
	tests := []struct {
		method, path string
		body         any
		status       int
		into         any
	}{
		{"GET", "/v1/modules", nil, 200, &wire.ModuleList{}},
		{"GET", "/v1/modules/class-tree", nil, 200, &wire.ModuleInfo{}},
		{"POST", "/v1/events", wire.AppendRequest{AggregateType: "Other", AggregateID: "x",
			Events: []wire.EventInput{{Type: "Nothing", Data: json.RawMessage(`{"n":1}`)}}}, 201, &wire.AppendResult{}},
		{"GET", "/v1/aggregates/Job/leaf/events", nil, 200, &wire.CommitList{}},
		{"GET", "/v1/subscriptions", nil, 200, &wire.SubscriptionList{}},
		{"GET", "/v1/subscriptions/" + classTreeSub, nil, 200, &wire.Subscription{}},
		{"GET", "/v1/parked", nil, 200, &wire.ParkedPage{}},
		{"GET", "/v1/parked?state=waiting", nil, 200, &wire.ParkedPage{}},
		{"GET", parked + "leaf", nil, 200, &leaf},
		{"GET", parked + "stranger", nil, 200, &stranger},
		{"GET", parked + "nobody", nil, 404, &wire.Problem{}},
		{"GET", "/v1/parked?state=asleep", nil, 400, &wire.Problem{}},
		{"POST", parked + "leaf/resume", wire.OperatorRequest{Reason: "looked at it"}, 202, &wire.Status{}},
	}
	for _, tt := range tests {
		r := h.must(tt.status, tt.method, tt.path, tt.body)
		dec := json.NewDecoder(bytes.NewReader(r.Body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(tt.into); err != nil {
			t.Errorf("%s %s: not a %T: %v\n%s", tt.method, tt.path, tt.into, err, r.Body)
			continue
		}
		again, err := json.Marshal(tt.into)
		if err != nil {
			t.Fatal(err)
		}
		if got := bytes.TrimSpace(r.Body); !bytes.Equal(again, got) {
			t.Errorf("%s %s: the answer is not what %T encodes to\n answer %s\n   wire %s", tt.method, tt.path, tt.into, got, again)
		}
	}
	if leaf.State != wire.StateWaiting || leaf.WaitReason != wire.WaitUnrecoverable || leaf.Error.Class != "unrecoverable" ||
		leaf.Error.Reason != "handler unrecoverable: Fatal" || leaf.InvocationKey == "" || leaf.Event == nil || leaf.Event.Type != "Fail" {
		t.Errorf("leaf: %+v; want waiting as unrecoverable, with its invocation key and event", leaf)
	}
	if stranger.State != wire.StateRetrying || stranger.NextRetry.IsZero() || len(stranger.Error.Undeclared) != 1 ||
		stranger.Error.Undeclared[0] != "Stranger" || stranger.Error.Class != "recoverable" {
		t.Errorf("stranger: %+v; want retrying, recoverable, Stranger undeclared", stranger)
	}

	// The CLI of the same binary shows what the wire types carry.
	cli := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(hostBin, append(args, "--server", h.URL, "--timeout", (30*time.Second).String())...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("host %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	out := cli("parked", "show", classTreeSub, "Job", "stranger")
	for _, want := range []string{"invocation key:", stranger.InvocationKey, "taken for:", "recoverable (" + stranger.Error.Reason + ")",
		"undeclared classes:", "Stranger (not in the module's class tree", "state:", "retrying", "history:"} {
		if !strings.Contains(out, want) {
			t.Errorf("parked show stranger lacks %q:\n%s", want, out)
		}
	}
	out = cli("parked", "list", "--state", "retrying")
	if !strings.Contains(out, "Job/stranger") || !strings.Contains(out, "recoverable: not declared") {
		t.Errorf("parked list lacks the stranger:\n%s", out)
	}
}
