package api

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/berthhq/berth/config"
	"github.com/berthhq/berth/internal/diskspace"
	"github.com/berthhq/berth/subscription"
)

// samplePath is a route's path with a value for each of its parameters.
func samplePath(route string) string {
	return strings.NewReplacer(":name", "x", ":type", "T", ":id", "i", ":subscription", "s", ":key", "k").Replace(route)
}

// belowReserve is a free-space guard on a fresh directory whose reserve no
// disk meets.
func belowReserve(t *testing.T) *diskspace.Guard {
	t.Helper()
	g, err := diskspace.New(t.TempDir(), diskspace.Options{Reserve: 1 << 62, ReserveName: "store.min-free"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// TestEveryWriteRouteIsGuarded walks the route table: below the reserve,
// every state-changing route answers 507 before its handler runs (the
// server here has none of the parts a handler needs, so a handler that ran
// would panic), except those the table marks as storing nothing — only the
// configuration reload, through which an operator lowers the reserve. A
// route added to the table is guarded unless it says otherwise.
func TestEveryWriteRouteIsGuarded(t *testing.T) {
	t.Parallel()
	reloaded := 0
	s := New(Deps{Config: config.Default, Disk: belowReserve(t), Reload: func() error { reloaded++; return nil }})
	var unguarded []string
	for _, rt := range s.routeTable() {
		if !changesState(rt.method) {
			if rt.guarded() || rt.store != reads {
				t.Errorf("%s %s: a safe method marked %v (guarded %v)", rt.method, rt.path, rt.store, rt.guarded())
			}
			continue
		}
		path := samplePath(rt.path)
		r := serveRecovered(s, req{method: rt.method, path: path})
		if !rt.guarded() {
			unguarded = append(unguarded, rt.method+" "+rt.path)
			if r.status == http.StatusInsufficientStorage || r.status == 0 {
				t.Errorf("%s %s is marked as storing nothing, yet answers %s below the reserve", rt.method, rt.path, r)
			}
			continue
		}
		if r.status == 0 {
			t.Errorf("%s %s below the reserve reached its handler", rt.method, rt.path)
			continue
		}
		p := problemOf(t, r, http.StatusInsufficientStorage)
		if p.Type != "https://berth.dev/problems/insufficient-storage" || !strings.Contains(p.Detail, "store.min-free") ||
			!strings.Contains(p.Detail, "nothing was written") {
			t.Errorf("%s %s below the reserve: %+v", rt.method, rt.path, p)
		}
	}
	if want := []string{"POST /v1/config/reload"}; !slices.Equal(unguarded, want) {
		t.Errorf("state-changing routes served below the reserve: %v, want only %v", unguarded, want)
	}
	if reloaded != 1 {
		t.Errorf("the reload ran %d times below the reserve, want 1", reloaded)
	}
}

// TestDeleteModuleBelowReserve: below the reserve, DELETE of a module
// answers 507 and the module stays deployed and running; with the reserve
// met again it is deleted (204).
func TestDeleteModuleBelowReserve(t *testing.T) {
	t.Parallel()
	h := newHost(t, "")
	if r := h.upload("shipment-notifier", ""); r.status != http.StatusCreated {
		t.Fatalf("upload: %s", r)
	}
	guard := belowReserve(t)
	// The same parts, served with the free-space guard.
	deps := DepsOf(h.asm)
	deps.Disk = guard
	api := New(deps)
	do := func(r req) response {
		t.Helper()
		resp := serve(api, r)
		checkResponse(t, api, r.method, r.path, resp)
		return resp
	}
	p := problemOf(t, do(req{method: "DELETE", path: "/v1/modules/shipment-notifier"}), http.StatusInsufficientStorage)
	if !strings.Contains(p.Detail, "store.min-free") {
		t.Errorf("detail %q does not name store.min-free", p.Detail)
	}
	if _, ok := h.modules.Get("shipment-notifier"); !ok {
		t.Fatal("the module is gone after a refused DELETE")
	}
	if st, err := h.engine.Status(t.Context(), notifierSub); err != nil || st.State != subscription.StateRunning {
		t.Errorf("the module's subscription after a refused DELETE: %+v, %v", st, err)
	}

	guard.SetReserve(1)
	if r := do(req{method: "DELETE", path: "/v1/modules/shipment-notifier"}); r.status != http.StatusNoContent {
		t.Fatalf("DELETE with the reserve met: %s", r)
	}
	if _, ok := h.modules.Get("shipment-notifier"); ok {
		t.Error("the module is still deployed after a 204")
	}
}

// TestGuardedRoutesDocumentRefusal: every route refused below the reserve
// documents its 507 (and the 503 of a data directory removed) in
// openapi.json.
func TestGuardedRoutesDocumentRefusal(t *testing.T) {
	t.Parallel()
	doc := openapiMap(t)
	for _, rt := range New(Deps{Config: config.Default}).routeTable() {
		if !rt.guarded() {
			continue
		}
		resp, _ := operation(doc, rt.method, openapiPath(rt.path))["responses"].(map[string]any)
		for _, status := range []string{"503", "507"} {
			if resp[status] == nil {
				t.Errorf("%s %s is refused below the reserve but does not document %s", rt.method, rt.path, status)
			}
		}
	}
}
