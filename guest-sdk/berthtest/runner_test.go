package berthtest_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/berthhq/berth/guest-sdk/berth"
	"github.com/berthhq/berth/guest-sdk/berthtest"
	"github.com/berthhq/berth/wasm/abi"
)

// remote runs a processor the way a host does a compiled module: the
// handler sees its own ports, commands are queued and handed to the Spec's
// command port only after the handler succeeded, and nothing but the result
// comes back.
type remote struct {
	p     *berth.Processor
	calls []string // "handler key" of each call
}

func (r *remote) Run(ev *abi.Event, ports berth.Ports) abi.Result {
	r.calls = append(r.calls, ev.Handler+" "+ev.InvocationKey)
	var queued []berth.Command
	inner := ports
	inner.Commands = queue{&queued}
	res := r.p.Dispatch(ev, inner)
	if res.Status != abi.StatusOK {
		return res
	}
	for _, c := range queued {
		if err := ports.Commands.Send(c); err != nil {
			return abi.Result{Status: abi.StatusFailed, Failure: abi.Failure{Message: err.Error()}}
		}
	}
	return res
}

type queue struct{ cmds *[]berth.Command }

func (q queue) Send(c berth.Command) error { *q.cmds = append(*q.cmds, c); return nil }

func TestRunnerReactor(t *testing.T) {
	r := &remote{p: reactor()}
	spec := berthtest.NewWithRunner(t, r.p.Describe(), r)
	if spec.Processor.Name != "R" || spec.Processor.Kind != berth.Reactor || spec.Processor.Retry.Timeout != time.Minute {
		t.Fatalf("mirrored processor %+v", spec.Processor)
	}

	th := spec.WhenEvent(berthtest.Event{Type: "Classed", AggregateType: "Account", AggregateID: "a-1", Version: 3}).
		ExpectErrorClass(notification).ExpectErrorIs(unknownBuyer).ExpectErrorIs(notification)
	var e *berth.Error
	if !errors.As(th.Err, &e) || e.Class.Name() != "UnknownBuyer" || e.Code != "E404" || e.Message != "who?" {
		t.Errorf("Err = %#v, want the failure rebuilt", th.Err)
	}
	if th.Key != "R.classed:Account/a-1@3:0" || th.Attempt != 1 {
		t.Errorf("key %q attempt %d", th.Key, th.Attempt)
	}

	spec.WhenEvent(berthtest.Event{Type: "Busy"}).ExpectBackpressure(1500 * time.Millisecond)
	spec.HTTP.FailRefused()
	spec.WhenEvent(berthtest.Event{Type: "Calls", AggregateID: "a-1"}).
		ExpectSystemic().ExpectErrorIs(berth.ClassConnectionRefused).ExpectRequest("POST", "http://svc.test/a-1")
	spec.WhenEvent(berthtest.Event{Type: "Calls", AggregateID: "a-1"}).ExpectNoError()
	if len(r.calls) != 4 {
		t.Errorf("runner calls %v, want 4", r.calls)
	}
}

func TestRunnerSagaRejection(t *testing.T) {
	r := &remote{p: orderSaga(true)}
	spec := berthtest.NewWithRunner(t, r.p.Describe(), r)
	spec.Commands.Reject(berthtest.Command{Type: "ReserveStock"}, "out of stock")

	spec.WhenEvent(berthtest.Event{Type: "OrderPlaced", AggregateType: "Order", AggregateID: "o-1", Payload: `{"item":"sku-9"}`}).
		ExpectNoError().
		ExpectRejected(berthtest.Command{Type: "ReserveStock"}).
		ExpectCommand(berthtest.Command{AggregateType: "Order", AggregateID: "o-1", Type: "CancelOrder"}).
		ExpectCommand(berthtest.Command{Type: "Note"})
	want := []string{"onOrderPlaced OrderSaga.onOrderPlaced:Order/o-1@1:0", "onRejected OrderSaga.onOrderPlaced:Order/o-1@1:0:rejected:0"}
	if !slices.Equal(r.calls, want) {
		t.Errorf("runner calls %q, want %q", r.calls, want)
	}

	// A failed call sends nothing, however much it queued.
	spec.WhenEvent(berthtest.Event{Type: "OrderPlaced", AggregateID: "o-2", Payload: `{"item":"sku-9","fail":true}`}).
		ExpectError().ExpectNoCommand().ExpectNoRejection()
}

func TestRunnerProjection(t *testing.T) {
	p := &berth.Processor{Name: "P", Kind: berth.Projection}
	p.On("onPlaced", "Placed", func(c *berth.Context) error {
		if err := c.KV.Put("order/"+c.Event.AggregateID, c.Event.Payload); err != nil {
			return err
		}
		if c.Event.AggregateID == "bad" {
			return errBoom
		}
		return nil
	})
	r := &remote{p: p}
	spec := berthtest.NewWithRunner(t, p.Describe(), r)

	spec.WhenEvent(berthtest.Event{Type: "Placed", AggregateID: "o-1", Payload: `{"total":3}`}).
		ExpectNoError().ExpectState("order/o-1", map[string]int{"total": 3})
	spec.WhenEvent(berthtest.Event{Type: "Placed", AggregateID: "bad", Payload: `{}`}).
		ExpectError().ExpectNoState("order/bad")
}

func TestNewWithRunnerRefusesABadDescription(t *testing.T) {
	rec := &recorder{}
	desc := abi.Description{ABIVersion: abi.Version, Processor: "", Kind: berth.Reactor}
	berthtest.NewWithRunner(rec, desc, berthtest.RunnerFunc(func(*abi.Event, berth.Ports) abi.Result { return abi.Result{} }))
	if len(rec.fatals) == 0 {
		t.Error("a description the host refuses was taken")
	}
}
