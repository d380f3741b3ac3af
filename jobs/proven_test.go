package jobs_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/jobs"
	"github.com/berthhq/berth/ledger"
)

// deployment is the module version a fake registry has deployed.
type deployment struct {
	mu  sync.Mutex
	sha map[string]string
}

func (d *deployment) set(module, sha string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if sha == "" {
		delete(d.sha, module)
		return
	}
	d.sha[module] = sha
}

func (d *deployment) get(module string) (string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	sha, ok := d.sha[module]
	return sha, ok
}

// provenGroup parks n records of A.h in one group and keeps a proof of
// the candidate sha on it that handled all of them; it returns the group.
func (e *env) provenGroup(n int, sha string) string {
	e.t.Helper()
	e.park("A.h", n, "ConnectionRefused")
	var group string
	err := e.store.Update(context.Background(), func(tx ledger.Tx) error {
		gs, _, err := tx.GroupsParked(ledger.GroupFilter{Subscription: "A.h"})
		if err != nil || len(gs) != 1 {
			return fmt.Errorf("groups %+v, %v: want one", gs, err)
		}
		group = gs[0].Fingerprint
		var keys []ledger.ProofKey
		for i := range n {
			keys = append(keys, ledger.ProofKey{AggregateType: "Order", AggregateID: fmt.Sprintf("A-%02d", i)})
		}
		return tx.PutProof(ledger.Proof{Subscription: "A.h", Group: group, Module: "notifier", SHA256: sha,
			Replayed: n, Handled: n, Created: e.clock.Now()}, keys)
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return group
}

// TestProvenJobStopsWhenTheDeploymentMovesAway: a proven job acts only
// while its candidate is the version deployed, asking before each batch.
// Once another version is deployed it stops, cancelled by the host with
// the reason, having acted on what it did before; one whose candidate is
// no longer deployed when it starts acts on nothing.
func TestProvenJobStopsWhenTheDeploymentMovesAway(t *testing.T) {
	const fix, other = "f1f1", "0b0b"
	e := newEnv(t)
	group := e.provenGroup(6, fix)
	dep := &deployment{sha: map[string]string{"notifier": fix}}
	r, err := jobs.Open(context.Background(), jobs.Options{Ledger: e.store, Engine: e.eng, Clock: e.clock, Deployed: dep.get})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(context.Background()) })
	ctx := context.Background()
	spec := jobs.Spec{Action: ledger.JobResume, Actor: "ops", Reason: "fixed", Rate: 1,
		Filter: ledger.JobFilter{Subscriptions: []string{"A.h"}, Group: group, Proven: &ledger.JobProof{Module: "notifier", SHA256: fix}}}
	j, err := r.Create(ctx, spec)
	if err != nil || j.Matched != 6 {
		t.Fatalf("create: %+v, %v", j, err)
	}
	// Rate 1/s, batches of one: two act while the fix is deployed.
	e.waitCalls(1)
	e.clock.Advance(time.Second)
	e.waitCalls(2)
	dep.set("notifier", other) // a rollback, or another version, deployed
	e.clock.Advance(time.Second)
	stopped, err := r.Wait(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if stopped.State != ledger.JobCancelled || stopped.Done != 2 || stopped.Finished.IsZero() ||
		!strings.HasPrefix(stopped.Stopped, "not-deployed: module notifier is now sha256 0b0b") {
		t.Fatalf("the job after the deployment moved: %+v", stopped)
	}
	if n := len(e.eng.called()); n != 2 || e.parked() != 4 {
		t.Fatalf("%d actions, %d parked after the stop; want 2, 4", n, e.parked())
	}

	// Deployed again, a new job resumes what is left; with the module
	// removed before it starts, a job acts on nothing.
	dep.set("notifier", "")
	j, err = r.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	stopped, err = r.Wait(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if stopped.State != ledger.JobCancelled || stopped.Done != 0 || !strings.Contains(stopped.Stopped, "module notifier is no longer deployed") {
		t.Fatalf("a job with its module removed: %+v", stopped)
	}
	dep.set("notifier", fix)
	j, err = r.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	for i := 3; i <= 6; i++ {
		e.waitCalls(i)
		e.clock.Advance(time.Second)
	}
	done, err := r.Wait(ctx, j.ID)
	if err != nil || done.State != ledger.JobDone || done.Done != 4 || done.Stopped != "" || e.parked() != 0 {
		t.Fatalf("the job once deployed again: %+v, %v; %d parked", done, err, e.parked())
	}
}
