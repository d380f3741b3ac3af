package tests

import (
	"strings"
	"testing"
	"time"
)

type moduleVersion struct {
	Version        int    `json:"version"`
	SHA256         string `json:"sha256"`
	RolledBackFrom int    `json:"rolledBackFrom"`
	Current        bool   `json:"current"`
}

func (h *hostProc) versions(t *testing.T) []moduleVersion {
	t.Helper()
	var out struct {
		Module   string          `json:"module"`
		Versions []moduleVersion `json:"versions"`
	}
	h.must(200, "GET", "/v1/modules/"+moduleName+"/versions", nil).JSON(t, &out)
	if out.Module != moduleName {
		t.Fatalf("versions of %q answered for %q", moduleName, out.Module)
	}
	return out.Versions
}

// TestRollbackABadDeploy: a deploy that breaks the notifier (the wrong
// module uploaded under its name) is rolled back to the kept version over
// REST; the events appended meanwhile are handled by the version rolled
// back to, and the versions survive a restart. Bad rollbacks are clear
// problems that change nothing.
func TestRollbackABadDeploy(t *testing.T) {
	svc := newNotifier(t)
	h := newHost(t, hostConfig{NotifyURL: svc.URL(), Extra: fastRetry})
	good := h.uploadNotifier(t, 201)
	h.appendShipped(t, "o-1", "alice")
	svc.waitNotified(t, key("o-1", 1), 20*time.Second)

	// The wrong bytes go up under the notifier's name: version 2.
	wrong, err := orderSummaryWasm()
	if err != nil {
		t.Fatal(err)
	}
	var v2 moduleInfo
	h.must(200, "PUT", "/v1/modules/"+moduleName, wrong, "Content-Type", "application/wasm").JSON(t, &v2)
	if v2.Processor != "OrderSummary" {
		t.Fatalf("the wrong upload: %+v", v2)
	}
	h.appendShipped(t, "o-2", "bob") // no module handles the notifier's subscription now: it waits

	vs := h.versions(t)
	if len(vs) != 2 || vs[0].Version != 1 || vs[0].SHA256 != good.SHA256 || vs[0].Current || !vs[1].Current || vs[1].SHA256 != v2.SHA256 {
		t.Fatalf("versions after two uploads: %+v", vs)
	}

	// Bad rollbacks change nothing.
	for _, tc := range []struct {
		body   string
		status int
		detail string
	}{
		{`{}`, 400, "version is required"},
		{`{"version": 0}`, 400, "version is required"},
		{`{"version": "1"}`, 400, "version"},
		{`{"version": 7}`, 404, "has no version 7"},
	} {
		r := h.request("POST", "/v1/modules/"+moduleName+"/rollback", []byte(tc.body), "Content-Type", "application/json")
		if r.Status != tc.status || !strings.Contains(string(r.Body), tc.detail) {
			t.Errorf("rollback %s: %s; want %d naming %q", tc.body, r, tc.status, tc.detail)
		}
	}
	if r := h.request("GET", "/v1/modules/nope/versions", nil); r.Status != 404 {
		t.Errorf("versions of an unknown module: %s", r)
	}
	if got := h.versions(t); len(got) != 2 || !got[1].Current {
		t.Fatalf("bad rollbacks changed the versions: %+v", got)
	}

	// Roll back to 1: version 3, the notifier's bytes; o-2 is delivered.
	var v3 struct {
		moduleInfo
		Version        int `json:"version"`
		RolledBackFrom int `json:"rolledBackFrom"`
	}
	h.must(200, "POST", "/v1/modules/"+moduleName+"/rollback", []byte(`{"version": 1}`), "Content-Type", "application/json").JSON(t, &v3)
	if v3.Version != 3 || v3.RolledBackFrom != 1 || v3.SHA256 != good.SHA256 || v3.Processor != "ShipmentNotifier" {
		t.Fatalf("the rollback answered %+v", v3)
	}
	svc.waitNotified(t, key("o-2", 1), 20*time.Second)
	if n := svc.notified(key("o-1", 1)); n != 1 {
		t.Errorf("o-1 notified %d times, want 1 (the rollback must not replay it)", n)
	}

	// The versions survive a restart.
	h.Stop()
	h = h.restart(t)
	vs = h.versions(t)
	if len(vs) != 3 || vs[2].Version != 3 || !vs[2].Current || vs[2].RolledBackFrom != 1 {
		t.Fatalf("versions after a restart: %+v", vs)
	}
	h.appendShipped(t, "o-3", "carol")
	svc.waitNotified(t, key("o-3", 1), 20*time.Second)
}
