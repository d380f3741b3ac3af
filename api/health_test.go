package api

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/api/wire"
	"github.com/berthhq/berth/config"
	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/internal/diskspace"
)

// diskHost is the API over a real event log whose data directory has a
// free-space guard the test moves the reserve of.
type diskHost struct {
	t     *testing.T
	api   *Server
	guard *diskspace.Guard
	dir   string
}

func newDiskHost(t *testing.T) *diskHost {
	t.Helper()
	dir := t.TempDir()
	guard, err := diskspace.New(dir, diskspace.Options{Reserve: 1, ReserveName: "store.min-free"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { guard.Close() })
	events, err := eventlog.Open(filepath.Join(dir, "events"), eventlog.Options{MemTableSize: 4 << 20, BlockCacheSize: 1 << 20, Space: guard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Bounded: a log whose directory a test removed cannot flush, ever.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		events.Close(ctx)
	})
	return &diskHost{t: t, dir: dir, guard: guard, api: New(Deps{Config: config.Default, Log: events, Disk: guard})}
}

func (h *diskHost) do(r req) response {
	h.t.Helper()
	resp := serve(h.api, r)
	checkResponse(h.t, h.api, r.method, r.path, resp)
	return resp
}

const oneEvent = `{"aggregateType":"Order","aggregateId":"o-1","events":[{"type":"Placed","data":{}}]}`

// TestWritesRefusedBelowReserve: below the reserve an append answers 507
// naming the directory, the free space and the reserve, and stores nothing;
// reads and /healthz go on ("disk low"), /readyz is 503; once the reserve is
// met again the append goes through.
func TestWritesRefusedBelowReserve(t *testing.T) {
	h := newDiskHost(t)
	if r := h.do(req{method: "POST", path: "/v1/events", body: oneEvent}); r.status != http.StatusCreated {
		t.Fatalf("append: %s", r)
	}

	h.guard.SetReserve(1 << 62)
	p := problemOf(t, h.do(req{method: "POST", path: "/v1/events", body: oneEvent}), http.StatusInsufficientStorage)
	if p.Type != "https://berth.dev/problems/insufficient-storage" {
		t.Errorf("problem type %s", p.Type)
	}
	for _, want := range []string{h.dir, "free", "store.min-free", "nothing was written"} {
		if !strings.Contains(p.Detail, want) {
			t.Errorf("detail %q does not say %q", p.Detail, want)
		}
	}
	var events wire.CommitList
	r := h.do(req{method: "GET", path: "/v1/aggregates/Order/o-1/events"})
	if r.status != http.StatusOK {
		t.Fatalf("read below the reserve: %s", r)
	}
	r.json(t, &events)
	if len(events.Commits) != 1 {
		t.Errorf("%d commits after a refused append, want 1", len(events.Commits))
	}
	var health wire.Health
	r = h.do(req{method: "GET", path: "/healthz"})
	r.json(t, &health)
	if r.status != http.StatusOK || health.Status != "disk low" || health.Disk == nil || health.Disk.Writable ||
		health.Disk.Reserve != 1<<62 || health.Disk.Free <= 0 || health.Disk.Dir != h.dir {
		t.Errorf("healthz below the reserve: %s", r)
	}
	p = problemOf(t, h.do(req{method: "GET", path: "/readyz"}), http.StatusServiceUnavailable)
	if p.Type != "https://berth.dev/problems/store-cannot-write" {
		t.Errorf("readyz below the reserve: %+v", p)
	}

	h.guard.SetReserve(1)
	if r := h.do(req{method: "POST", path: "/v1/events", body: oneEvent}); r.status != http.StatusCreated {
		t.Fatalf("append after the reserve was lowered: %s", r)
	}
	r = h.do(req{method: "GET", path: "/healthz"})
	r.json(t, &health)
	if health.Status != "ok" || !health.Disk.Writable {
		t.Errorf("healthz after the reserve was lowered: %s", r)
	}
	if r := h.do(req{method: "GET", path: "/readyz"}); r.status != http.StatusOK {
		t.Errorf("readyz after the reserve was lowered: %s", r)
	}
}

// TestWritesRefusedWhenDataDirectoryRemoved: a data directory removed under
// the host refuses writes with 503 and /healthz says the store cannot write.
func TestWritesRefusedWhenDataDirectoryRemoved(t *testing.T) {
	h := newDiskHost(t)
	events := filepath.Join(h.dir, "events")
	if err := h.guard.Watch(events); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(events); err != nil {
		t.Fatal(err)
	}
	h.guard.SetReserve(1) // takes a reading now, rather than at the next MaxAge
	p := problemOf(t, h.do(req{method: "POST", path: "/v1/events", body: oneEvent}), http.StatusServiceUnavailable)
	if p.Type != "https://berth.dev/problems/store-unavailable" || !strings.Contains(p.Detail, events) {
		t.Errorf("append with the data directory removed: %+v", p)
	}
	var health wire.Health
	r := h.do(req{method: "GET", path: "/healthz"})
	r.json(t, &health)
	if r.status != http.StatusOK || health.Status != "store cannot write" || health.Disk.Error == "" {
		t.Errorf("healthz with the data directory removed: %s", r)
	}
	problemOf(t, h.do(req{method: "GET", path: "/readyz"}), http.StatusServiceUnavailable)
}
