package assembly_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/assembly"
	"github.com/berthhq/berth/config"
	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/internal/testing/natstest"
	"github.com/berthhq/berth/jobs"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/retry"
	"github.com/berthhq/berth/subscription"
	"github.com/berthhq/berth/webhook"
)

// dutyHolder waits until exactly one host holds the duty and returns it.
func dutyHolder(t *testing.T, ms []*member, name string) *member {
	t.Helper()
	var holder *member
	checkfor.Eventually(t, func() error {
		holder = nil
		for _, m := range ms {
			for _, d := range m.h.Cluster.Duties() {
				if d.Name() == name && d.Held() {
					if holder != nil {
						return fmt.Errorf("duty %s held by %s and %s", name, holder.id, m.id)
					}
					holder = m
				}
			}
		}
		if holder == nil {
			return fmt.Errorf("no host holds duty %s", name)
		}
		return nil
	})
	return holder
}

// hookCalls is a webhook receiver: the deliveries, as "event aggregate".
type hookCalls struct {
	mu  sync.Mutex
	got []string
}

func (c *hookCalls) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var p webhook.Payload
	if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	c.got = append(c.got, p.Type+" "+p.AggregateID)
	c.mu.Unlock()
}

func (c *hookCalls) count(call string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(slices.DeleteFunc(slices.Clone(c.got), func(g string) bool { return g != call }))
}

// invocations counts a hand-made handler's calls by aggregate and host; an
// aggregate's first call fails (unrecoverable: it parks), the others pass.
type invocations struct {
	mu    sync.Mutex
	calls map[string][]string // aggregate → the hosts that called, in order
}

func (v *invocations) on(host string) subscription.Invoker {
	return subscription.InvokerFunc(func(_ context.Context, d subscription.Delivery) *retry.Failure {
		v.mu.Lock()
		defer v.mu.Unlock()
		v.calls[d.Commit.AggregateID] = append(v.calls[d.Commit.AggregateID], host)
		if len(v.calls[d.Commit.AggregateID]) == 1 {
			return &retry.Failure{Classes: []string{"Refused"}, Message: "refused"}
		}
		return nil
	})
}

func (v *invocations) of(id string) []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.calls[id])
}

// outboxEmpty reports whether every notification was delivered and
// acknowledged (so no host can send it again).
func outboxEmpty(t *testing.T, h *assembly.Host) bool {
	var n int
	if err := h.Ledger.View(t.Context(), func(tx ledger.Tx) error {
		ns, err := tx.Notifications(0, 1)
		n = len(ns)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return n == 0
}

// toldOnce says what the webhook was told and what h's outbox holds until
// call was delivered once and nothing is left; nil then.
func toldOnce(t *testing.T, hooks *hookCalls, call string, h *assembly.Host) error {
	hooks.mu.Lock()
	got := slices.Clone(hooks.got)
	hooks.mu.Unlock()
	if n, empty := hooks.count(call), outboxEmpty(t, h); n != 1 || !empty {
		return fmt.Errorf("%q told %d times, want once; the outbox empty: %v; told %v", call, n, empty, got)
	}
	return nil
}

// ownedBy says who owns sub's partitions until each is owned once and
// among them hosts a and b; nil then.
func ownedBy(ms []*member, sub string, parts int, a, b string) error {
	if got, ok := owners(ms, sub, parts); !ok || !slices.Contains(got, a) || !slices.Contains(got, b) {
		return fmt.Errorf("partition owners %q, want every partition owned, %s and %s among them", got, a, b)
	}
	return nil
}

// dutySub is the subscription of dutyCluster's hosts.
const dutySub = "Test.orders"

// dutyCluster opens two hosts, h1 and h2, sending webhooks to the hook
// receiver it returns, with subscription dutySub on calls (an aggregate's
// first call fails and parks it), and waits until they split its
// partitions.
func dutyCluster(t *testing.T) ([]*member, *hookCalls, *invocations) {
	t.Helper()
	hooks := &hookCalls{}
	hookSrv := httptest.NewServer(hooks)
	t.Cleanup(hookSrv.Close)
	srv := natstest.RunServer(t)
	ms := openMembers(t, srv.URL(), func(cfg *config.Config) {
		cfg.Webhooks = []config.Webhook{{Name: "ops", URL: hookSrv.URL}}
		cfg.ClassifierConfig.Rules = []retry.Rule{{Class: "Refused", As: "unrecoverable"}}
	}, "h1", "h2")
	ctx := t.Context()
	calls := &invocations{calls: map[string][]string{}}
	for _, m := range ms {
		if err := m.h.Engine.Add(ctx, subscription.Spec{Name: dutySub, Start: subscription.StartBeginning, Invoker: calls.on(m.id)}); err != nil {
			t.Fatal(err)
		}
		if err := m.h.Cluster.SetSubscriptions(ctx, m.h.Engine.Subscriptions()); err != nil {
			t.Fatal(err)
		}
	}
	parts := ms[0].h.Config().Subscription.Partitions
	checkfor.Eventually(t, func() error { return ownedBy(ms, dutySub, parts, "h1", "h2") })
	return ms, hooks, calls
}

// TestClusterDutiesRunOnce: of two hosts, one runs the jobs and one sends
// the webhooks: a record parked on either is told to the webhook once, a
// bulk job created on the host that does not run jobs is run by the one
// that does, once; and when that host closes, the other takes every duty
// over and goes on.
func TestClusterDutiesRunOnce(t *testing.T) {
	ms, hooks, calls := dutyCluster(t)
	ctx := t.Context()
	const sub = dutySub
	parts := ms[0].h.Config().Subscription.Partitions
	owner, _ := owners(ms, sub, parts)
	jobsOn, hooksOn := dutyHolder(t, ms, "jobs"), dutyHolder(t, ms, "webhooks")
	dutyHolder(t, ms, "retention")
	other := ms[0]
	if other == jobsOn {
		other = ms[1]
	}
	// An aggregate of a partition the jobs host owns: jobs act through the
	// engine of the host they run on.
	id := ""
	for i := 0; id == ""; i++ {
		if c := fmt.Sprint("o-", i); owner[eventlog.PartitionOf("Order", c, parts)] == jobsOn.id {
			id = c
		}
	}
	if _, err := other.h.Events.Append(ctx, eventlog.AppendRequest{AggregateType: "Order", AggregateID: id,
		ExpectedVersion: eventlog.AnyVersion, Events: []eventlog.Event{{Type: "OrderPlaced"}}}); err != nil {
		t.Fatal(err)
	}
	checkfor.Eventually(t, func() error { return toldOnce(t, hooks, "parked "+id, other.h) })

	j, err := other.h.Jobs.Create(ctx, jobs.Spec{Action: ledger.JobResume, Filter: ledger.JobFilter{Subscriptions: []string{sub}},
		Actor: "ops", Rate: 100})
	if err != nil || j.Matched != 1 {
		t.Fatalf("create the job: %+v, %v", j, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	done, err := other.h.Jobs.Wait(wctx, j.ID)
	if err != nil || done.State != ledger.JobDone || done.Done != 1 || done.Failed != 0 {
		t.Fatalf("the job: %+v, %v", done, err)
	}
	checkfor.Eventually(t, func() error { return toldOnce(t, hooks, "resumed "+id, other.h) })
	if got := calls.of(id); !slices.Equal(got, []string{jobsOn.id, jobsOn.id}) {
		t.Fatalf("%s handled on %v; want twice on %s (the park, the job's resume)", id, got, jobsOn.id)
	}
	if hooks.count("parked "+id) != 1 {
		t.Fatalf("webhook deliveries %v", hooks.got)
	}

	// The host holding the webhooks duty closes: the other sends them.
	if err := hooksOn.h.Close(ctx); err != nil {
		t.Fatal(err)
	}
	rest := ms[0]
	if rest == hooksOn {
		rest = ms[1]
	}
	for _, name := range []string{"jobs", "webhooks", "retention"} {
		if dutyHolder(t, []*member{rest}, name) != rest {
			t.Fatalf("duty %s not taken over", name)
		}
	}
	checkfor.Eventually(t, func() error {
		if got, ok := owners([]*member{rest}, sub, parts); !ok || slices.Contains(got, hooksOn.id) {
			return fmt.Errorf("partition owners %q, want %s owning every partition", got, rest.id)
		}
		return nil
	})
	if _, err := rest.h.Events.Append(ctx, eventlog.AppendRequest{AggregateType: "Order", AggregateID: "late",
		ExpectedVersion: eventlog.AnyVersion, Events: []eventlog.Event{{Type: "OrderPlaced"}}}); err != nil {
		t.Fatal(err)
	}
	checkfor.Eventually(t, func() error { return toldOnce(t, hooks, "parked late", rest.h) })
	if hooks.count("parked "+id) != 1 || hooks.count("resumed "+id) != 1 {
		t.Fatalf("webhook deliveries after the handover %v", hooks.got)
	}
}

// TestClusterJobMovesMidJob: the host running a bulk resume gives the jobs
// duty up mid-job (its duty closes; the host stays): the other host claims
// the duty at the next epoch and goes on from the job's stored progress.
// Every parked aggregate, on either host's partitions, is resumed exactly
// once (handled twice: the park, the resume), the job counts each done
// once, and each resume is told to the webhook once.
func TestClusterJobMovesMidJob(t *testing.T) {
	ms, hooks, calls := dutyCluster(t)
	ctx := t.Context()
	const n = 10
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprint("m-", i)
		if _, err := ms[i%2].h.Events.Append(ctx, eventlog.AppendRequest{AggregateType: "Order", AggregateID: ids[i],
			ExpectedVersion: eventlog.AnyVersion, Events: []eventlog.Event{{Type: "OrderPlaced"}}}); err != nil {
			t.Fatal(err)
		}
	}
	checkfor.Eventually(t, func() error {
		for _, id := range ids {
			if n := hooks.count("parked " + id); n != 1 {
				return fmt.Errorf("%s's park told %d times, want once", id, n)
			}
		}
		return nil
	})
	jobsOn := dutyHolder(t, ms, "jobs")
	other := ms[0]
	if other == jobsOn {
		other = ms[1]
	}
	var before ledger.DutyFence
	for _, d := range jobsOn.h.Cluster.Duties() {
		if d.Name() == "jobs" {
			before = d.Fence()
		}
	}
	j, err := other.h.Jobs.Create(ctx, jobs.Spec{Action: ledger.JobResume, Filter: ledger.JobFilter{Subscriptions: []string{dutySub}},
		Actor: "ops", Rate: 5})
	if err != nil || j.Matched != n {
		t.Fatalf("create the job: %+v, %v", j, err)
	}
	checkfor.Eventually(t, func() error {
		got, err := other.h.Jobs.Get(ctx, j.ID)
		if err == nil && got.Done < n/3 {
			err = fmt.Errorf("the job %d of %d done, want a third", got.Done, n)
		}
		return err
	})
	for _, d := range jobsOn.h.Cluster.Duties() {
		if d.Name() == "jobs" {
			if err := d.Close(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if dutyHolder(t, ms, "jobs") != other {
		t.Fatal("the jobs duty did not move")
	}
	for _, d := range other.h.Cluster.Duties() {
		if f := d.Fence(); d.Name() == "jobs" && f.Epoch != before.Epoch+1 {
			t.Fatalf("claim %+v after %+v", f, before)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	done, err := other.h.Jobs.Wait(wctx, j.ID)
	if err != nil || done.State != ledger.JobDone || done.Done != n || done.Gone != 0 || done.Failed != 0 {
		t.Fatalf("the job: %+v, %v", done, err)
	}
	checkfor.Eventually(t, func() error {
		for _, id := range ids {
			if hooks.count("resumed "+id) == 0 {
				return fmt.Errorf("%s's resume not told", id)
			}
		}
		if !outboxEmpty(t, other.h) {
			return errors.New("every resume told, but the outbox not yet empty")
		}
		return nil
	})
	for _, id := range ids {
		if got := calls.of(id); len(got) != 2 {
			t.Errorf("%s handled on %v; want twice (the park, the resume)", id, got)
		}
		if c := hooks.count("resumed " + id); c != 1 {
			t.Errorf("resumed %s told %d times", id, c)
		}
	}
}
