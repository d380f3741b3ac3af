package tests

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/internal/testing/natstest"
	"github.com/berthhq/berth/internal/testing/powercut"
	"github.com/nats-io/nats-server/v2/server"
)

// The power-cut tests run the built host with its data directory on a
// powercut mount (internal/testing/powercut): what the host did not fsync is lost
// at the cut, as on a machine that loses power. After each cut the host is
// SIGKILLed, the mount comes back over the same disk, and the host must
// start on the first try and keep everything it acknowledged.

// recoveredLine is what a store logs when it opens a directory left by a
// crash or a power cut (internal/badgerdb).
const recoveredLine = "opened after a stop that did not close it"

// powercutSeed is the seed of the tests' random choices: POWERCUT_SEED, or
// the time. It is logged so that a failing run can be repeated.
func powercutSeed(t *testing.T) *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("POWERCUT_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("POWERCUT_SEED=%q: %v", s, err)
		}
	}
	t.Logf("seed %d (set POWERCUT_SEED to repeat)", seed)
	return rand.New(rand.NewPCG(seed, 0))
}

// newPowercutHost starts a host whose data directory is on the powercut
// mount pc (a fresh one when nil); its config file is outside the mount
// (the test's, not the host's).
func newPowercutHost(t *testing.T, pc *powercut.FS, cfg hostConfig) (*hostProc, *powercut.FS) {
	t.Helper()
	if pc == nil {
		pc = powercut.Mount(t, t.TempDir())
	}
	data := filepath.Join(pc.Dir(), "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "berth.toml")
	writeFile(t, path, cfg.TOML())
	return startHost(t, data, path), pc
}

// cutPlan is what cutAndRestart does besides cutting, killing the host and
// starting it again.
type cutPlan struct {
	afterKill   func() // with the power off (stop the load, a NATS server)
	beforeStart func() // with the power back (start a NATS server again)
	// noRecovery: the host keeps no Badger store of its own, so no line
	// says what one recovered from.
	noRecovery bool
}

// cutAndRestart cuts the power under h, kills it, brings the mount back
// and starts the host again: it must serve on this one start, and say that
// its stores recovered from a stop that did not close them.
func cutAndRestart(t *testing.T, h *hostProc, pc *powercut.FS, plan cutPlan) *hostProc {
	t.Helper()
	dirty := pc.Dirty()
	pc.Cut()
	h.Kill()
	if plan.afterKill != nil {
		plan.afterKill()
	}
	pc.Remount(t)
	t.Logf("power cut with %d files holding unsynced changes", dirty)
	if plan.beforeStart != nil {
		plan.beforeStart()
	}
	started := time.Now()
	h2 := h.restart(t) // fails the test unless this first start serves
	t.Logf("the host served %v after its one start", time.Since(started).Round(time.Millisecond))
	if strings.Contains(h2.Stderr(), "took over the membership of this host's previous run") {
		t.Log("it took its membership over from the run the cut stopped, without waiting out the lease")
	}
	h2.must(200, "GET", "/v1/subscriptions", nil)
	if log := h2.Stderr(); !plan.noRecovery && !strings.Contains(log, recoveredLine) {
		t.Errorf("the host's log has no line saying what it recovered from (want %q):\n%s", recoveredLine, log)
	}
	return h2
}

// TestPowerCutUnderLoad: four clients append to 24 orders while a
// projection and a reactor follow the log; the power is cut at a random
// moment (seeded, logged). The host starts on the first try, every append
// that was answered 201 is in the log at its version, the projection is
// the fold of the log, and every OrderShipped is notified, each
// aggregate's in order.
func TestPowerCutUnderLoad(t *testing.T) {
	svc := newNotifier(t)
	h, pc := newPowercutHost(t, nil, hostConfig{NotifyURL: svc.URL(), Extra: fastRetry})
	cutUnderLoad(t, h, pc, svc, cutPlan{})
}

// cutUnderLoad is the test above on h, whose data is on pc and which
// notifies svc; plan says what else the cut and restart do.
func cutUnderLoad(t *testing.T, h *hostProc, pc *powercut.FS, svc *notifier, plan cutPlan) {
	t.Helper()
	rng := powercutSeed(t)
	summary, err := orderSummaryWasm()
	if err != nil {
		t.Fatal(err)
	}
	h.must(201, "PUT", "/v1/modules/order-summary", summary, "Content-Type", "application/wasm")
	h.uploadNotifier(t, 201)

	ids := make([][]string, 4)
	var flat []string
	for i := range 24 {
		id := fmt.Sprintf("o-%02d", i)
		ids[i%4] = append(ids[i%4], id)
		flat = append(flat, id)
	}
	buyer := func(id string) string { return "buyer-" + id[len(id)-1:] }
	load := startLoad(t, []*hostProc{h}, 4, ids, buyer)
	cutAt := 60 + rng.IntN(240)
	t.Logf("the cut comes after %d acknowledged appends", cutAt)
	syncs, acks := pc.SyncsByDir(), load.ackCount()
	checkfor.Within(t, 60*time.Second, func() error { return load.acked(cutAt) })
	var per []string
	for dir, n := range pc.SyncsByDir() {
		if n > syncs[dir] {
			per = append(per, fmt.Sprintf("%s %d", dir, n-syncs[dir]))
		}
	}
	slices.Sort(per)
	t.Logf("file syncs while %d appends were acknowledged, by directory: %s", load.ackCount()-acks, strings.Join(per, ", "))

	afterKill := plan.afterKill
	plan.afterKill = func() {
		load.halt()
		if afterKill != nil {
			afterKill()
		}
	}
	h2 := cutAndRestart(t, h, pc, plan)
	t.Logf("%d appends acknowledged, %d sent again after a failed answer", load.ackCount(), load.retries.Load())

	// Every acknowledged append is in the log, at the version acknowledged.
	logs := map[string][]clusterEvent{}
	for _, id := range flat {
		logs[id] = readAggregate(t, h2, id)
	}
	lost := 0
	for _, a := range load.acks {
		evs := logs[a.id]
		if a.version == 0 || int(a.version) > len(evs) || evs[a.version-1].N != a.n {
			if lost < 5 {
				t.Errorf("acknowledged append %d of %s at version %d is not in the log (%d commits)", a.n, a.id, a.version, len(evs))
			}
			lost++
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d acknowledged appends lost to the power cut", lost, len(load.acks))
	}

	// The projection is the fold of the log.
	want := foldSummaries(logs, buyer)
	h2.waitSummaries(t, want)
	shipped := 0
	for _, s := range want {
		shipped += s.Shipped
	}

	// Every OrderShipped is notified, each aggregate's in order.
	checkfor.Nil(t, 30*time.Second, 25*time.Millisecond, func() error {
		if n := notifiedOrders(t, svc, logs); n != shipped {
			return fmt.Errorf("%d of %d OrderShipped notified; not: %v", n, shipped, missingNotifications(svc, logs))
		}
		return nil
	})
	checkNotifiedInOrder(t, svc, logs)
}

// TestPowerCutKeepsWhatTheOperatorWasToldWasDone: aggregates parked as
// GET /v1/parked shows them, operator resumes and skips answered 202, an
// uploaded module answered 201, its subscription paused (200) and a bulk
// job answered 201 — then the power is cut at once, before anything else
// could flush them. After the first start: the parks not acted on are
// still parked, a resumed aggregate is not parked again and its events are
// notified, a skipped event is never notified (the next one is), the
// module is deployed and its subscription paused, and the job exists and
// finishes its work.
func TestPowerCutKeepsWhatTheOperatorWasToldWasDone(t *testing.T) {
	svc := newNotifier(t)
	h, pc := newPowercutHost(t, nil, hostConfig{NotifyURL: svc.URL(), Extra: fastRetry})
	h.uploadNotifier(t, 201)

	groups := []string{"held", "resumed", "skipped", "jobbed"}
	orders := map[string][]string{}
	for _, g := range groups {
		svc.set(g, behaviour{Unknown: true})
		for i := range 3 {
			id := fmt.Sprintf("%s-%d", g, i)
			orders[g] = append(orders[g], id)
			h.appendShipped(t, id, g)
			h.appendShipped(t, id, g) // held back behind the parked v1
		}
	}
	parkedIDs := func(h *hostProc) []string {
		var ids []string
		for _, p := range h.parked(t) {
			ids = append(ids, p.AggregateID)
		}
		slices.Sort(ids)
		return ids
	}
	var all []string
	for _, g := range groups {
		all = append(all, orders[g]...)
	}
	slices.Sort(all)
	checkfor.Within(t, 30*time.Second, func() error { return parkedAre(parkedIDs(h), all) })

	// The operator acts; each answer is the host's word that it is done.
	svc.set("resumed", behaviour{})
	svc.set("skipped", behaviour{})
	svc.set("jobbed", behaviour{})
	for _, id := range orders["resumed"] {
		h.must(202, "POST", parkedPath(id)+"/resume", map[string]string{"reason": "buyer imported"})
	}
	for _, id := range orders["skipped"] {
		h.must(202, "POST", parkedPath(id)+"/skip", map[string]any{"throughVersion": 1, "reason": "not to be sent"})
	}
	summary, err := orderSummaryWasm()
	if err != nil {
		t.Fatal(err)
	}
	var mod moduleInfo
	h.must(201, "PUT", "/v1/modules/order-summary", summary, "Content-Type", "application/wasm").JSON(t, &mod)
	h.must(200, "POST", "/v1/subscriptions/"+summarySub+"/pause", nil)
	var job jobView
	h.must(201, "POST", "/v1/jobs", []byte(`{"action": "resume", "filter": {"class": "UnknownBuyer", "message": "buyer jobbed"}, "reason": "imported", "rate": 20}`),
		"Content-Type", "application/json").JSON(t, &job)
	if job.Matched != 3 {
		t.Fatalf("the job matched %d, want the 3 jobbed orders: %+v", job.Matched, job)
	}

	h2 := cutAndRestart(t, h, pc, cutPlan{})

	// Parks not acted on are still parked; resumed and skipped ones are
	// not parked again; the job finishes its three.
	checkfor.Within(t, 30*time.Second, func() error {
		r := h2.request("GET", fmt.Sprintf("/v1/jobs/%d", job.ID), nil)
		if r.Status == 404 {
			t.Fatalf("the job acknowledged as %d is gone after the cut: %s", job.ID, r)
		}
		var j jobView
		r.JSON(t, &j)
		if j.State != "done" {
			return fmt.Errorf("the job after the cut: %s", r)
		}
		return nil
	})
	if j := h2.job(t, job.ID); j.Done+j.Gone != 3 || j.Failed != 0 {
		t.Errorf("the job after the cut: %+v, want its 3 orders done", j)
	}
	for _, g := range []string{"resumed", "skipped", "jobbed"} {
		for _, id := range orders[g] {
			svc.waitNotified(t, key(id, 2), 30*time.Second)
		}
	}
	// An aggregate leaves the ledger once it has rejoined live delivery,
	// just after its last held-back event is notified.
	checkfor.Within(t, 30*time.Second, func() error { return parkedAre(parkedIDs(h2), orders["held"]) })
	for _, id := range append(slices.Clone(orders["resumed"]), orders["jobbed"]...) {
		if svc.notified(key(id, 1)) == 0 {
			t.Errorf("%s was resumed and its v1 never notified", id)
		}
	}
	for _, id := range orders["skipped"] {
		if n := svc.notified(key(id, 1)); n != 0 {
			t.Errorf("%s v1 was skipped and notified %d times", id, n)
		}
	}
	for _, id := range orders["held"] {
		for _, c := range svc.callsOf("held") {
			if c.Key == key(id, 2) {
				t.Errorf("%s v2 was handled while its v1 is parked: %+v", id, c)
			}
		}
	}

	// The module is deployed, as uploaded.
	var got moduleInfo
	h2.must(200, "GET", "/v1/modules/order-summary", nil).JSON(t, &got)
	if got.SHA256 != mod.SHA256 || got.Kind != "projection" {
		t.Errorf("order-summary after the cut: %+v, want %+v", got, mod)
	}
	var st subscriptionStatus
	h2.must(200, "GET", "/v1/subscriptions/"+summarySub, nil).JSON(t, &st)
	if st.State != "paused" {
		t.Errorf("%s after the cut: %s, want paused as the operator left it", summarySub, st.State)
	}
}

// TestPowerCutWithoutSyncLosesAppends is the control of the tests above
// and the risk docs/config.md writes beside store.sync = "none": on that
// setting the same harness sees acknowledged appends lost at a cut (so the
// tests above would see a loss), and the host still starts on the first
// try.
func TestPowerCutWithoutSyncLosesAppends(t *testing.T) {
	h, pc := newPowercutHost(t, nil, hostConfig{Extra: "[store]\nsync = \"none\"\n"})
	const n = 20
	for i := range n {
		h.appendShipped(t, fmt.Sprintf("o-%d", i), "alice")
	}
	h2 := cutAndRestart(t, h, pc, cutPlan{})
	kept := countCommits(t, h2, n)
	t.Logf(`store.sync = "none": %d of %d acknowledged appends kept across the cut`, kept, n)
	if kept == n {
		t.Errorf(`store.sync = "none": every acknowledged append survived the cut; the harness did not cut what was not synced`)
	}
}

// jetstreamOnMount starts a NATS server (in the test's process) whose
// store is on pc, syncing every write when syncAlways is set, and returns
// it with the host config that uses it.
func jetstreamOnMount(t *testing.T, pc *powercut.FS, syncAlways bool) (*natstest.Node, string) {
	t.Helper()
	store := filepath.Join(pc.Dir(), "nats")
	node := natstest.RunServerWith(t, func(o *server.Options) {
		if syncAlways {
			natstest.SyncAlways(o)
		}
		o.StoreDir = store
	})
	return node, fmt.Sprintf(`
[store]
backend = "jetstream"

[store.jetstream]
urls = [%q]
stream = "CUT_EVENTS"
subject-prefix = "cut.events"

# The shortest lease: a host started again waits out the lease its killed
# run left, and the tests wait for that start.
[cluster]
lease-ttl = "3s"
`, node.URL())
}

// TestPowerCutOnJetStream is TestPowerCutUnderLoad on the JetStream backend
// with the server setting docs/config.md asks for (sync_interval: always):
// the NATS server's store and the host's data directory share the mount,
// and both lose power together; the server starts again on its store, then
// the host.
func TestPowerCutOnJetStream(t *testing.T) {
	pc := powercut.Mount(t, t.TempDir())
	node, cfg := jetstreamOnMount(t, pc, true)
	svc := newNotifier(t)
	h, _ := newPowercutHost(t, pc, hostConfig{NotifyURL: svc.URL(), Extra: fastRetry + cfg})
	cutUnderLoad(t, h, pc, svc, cutPlan{afterKill: node.Shutdown, beforeStart: node.Restart, noRecovery: true})
}

// TestPowerCutOnJetStreamWithoutSyncLosesAppends is the control of the
// test above and the risk docs/config.md writes beside the NATS servers'
// default (an fsync every two minutes): the same harness sees appends that
// the host acknowledged lost at a cut.
func TestPowerCutOnJetStreamWithoutSyncLosesAppends(t *testing.T) {
	pc := powercut.Mount(t, t.TempDir())
	node, cfg := jetstreamOnMount(t, pc, false)
	h, _ := newPowercutHost(t, pc, hostConfig{Extra: cfg})
	const n = 20
	for i := range n {
		h.appendShipped(t, fmt.Sprintf("o-%d", i), "alice")
	}
	h2 := cutAndRestart(t, h, pc, cutPlan{afterKill: node.Shutdown, beforeStart: node.Restart, noRecovery: true})
	kept := countCommits(t, h2, n)
	t.Logf("NATS without sync_interval always: %d of %d acknowledged appends kept across the cut", kept, n)
	if kept == n {
		t.Errorf("NATS without sync_interval always: every acknowledged append survived the cut; the harness did not cut what was not synced")
	}
}

// countCommits counts the commits of Order o-0 … o-(n-1) that h holds.
func countCommits(t *testing.T, h *hostProc, n int) int {
	t.Helper()
	kept := 0
	for i := range n {
		var out struct {
			Commits []json.RawMessage `json:"commits"`
		}
		r := h.request("GET", fmt.Sprintf("/v1/aggregates/Order/o-%d/events", i), nil)
		switch r.Status {
		case 404: // no events: the append was lost
		case 200:
			r.JSON(t, &out)
			kept += len(out.Commits)
		default:
			t.Fatalf("read o-%d: %s", i, r)
		}
	}
	return kept
}
