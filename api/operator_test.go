package api

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/berthhq/berth/cluster"
	"github.com/berthhq/berth/subscription"
)

// recordingOperator is the host's engine as the operator, noting each call;
// unreachable makes its resume answer as a cluster's Forwarder does when the
// aggregate's owner does not answer.
type recordingOperator struct {
	subscription.Operator
	unreachable bool
	mu          sync.Mutex
	calls       []string
}

func (o *recordingOperator) note(call string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, call)
}

func (o *recordingOperator) Pause(ctx context.Context, sub string, by subscription.Caller) error {
	o.note("pause")
	return o.Operator.Pause(ctx, sub, by)
}

func (o *recordingOperator) Unpause(ctx context.Context, sub string, by subscription.Caller) error {
	o.note("unpause")
	return o.Operator.Unpause(ctx, sub, by)
}

func (o *recordingOperator) Resume(ctx context.Context, sub, typ, id string, by subscription.Caller) error {
	o.note("resume")
	if o.unreachable {
		return fmt.Errorf("%w: host h2 owns partition 3 of %q and did not answer in time", cluster.ErrUnreachable, sub)
	}
	return o.Operator.Resume(ctx, sub, typ, id, by)
}

// TestOperatorCalls: the operator calls go through Deps.Operator (reads stay
// on the engine), and a cluster's owner that does not answer is a 503
// problem naming it.
func TestOperatorCalls(t *testing.T) {
	t.Parallel()
	h := newHost(t, "")
	if r := h.upload("shipment-notifier", ""); r.status != http.StatusCreated {
		t.Fatalf("upload: %s", r)
	}
	op := &recordingOperator{Operator: h.engine}
	h.api = New(Deps{Config: h.asm.Config, Modules: h.modules, Jobs: h.asm.Jobs, Log: h.events, Engine: h.engine,
		Operator: op, Ledger: h.ledger})
	sub := "/v1/subscriptions/" + notifierSub
	if r := h.do(req{method: "POST", path: sub + "/pause"}); r.status != http.StatusOK || !strings.Contains(string(r.body), `"paused"`) {
		t.Fatalf("pause: %s", r)
	}
	if r := h.do(req{method: "POST", path: sub + "/unpause"}); r.status != http.StatusOK {
		t.Fatalf("unpause: %s", r)
	}
	op.unreachable = true
	r := h.do(req{method: "POST", path: sub + "/parked/Order/o-1/resume"})
	if p := problemOf(t, r, http.StatusServiceUnavailable); p.Type != "https://berth.dev/problems/unavailable" ||
		!strings.Contains(p.Detail, "host h2") {
		t.Fatalf("resume with the owner unreachable: %+v", p)
	}
	if want := []string{"pause", "unpause", "resume"}; !slices.Equal(op.calls, want) {
		t.Fatalf("calls %v, want %v", op.calls, want)
	}
}
