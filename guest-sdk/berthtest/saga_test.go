package berthtest_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/berthhq/berth/guest-sdk/berth"
	"github.com/berthhq/berth/guest-sdk/berthtest"
)

var errCannotCancel = errors.New("cannot cancel")

// orderSaga reserves stock for a placed order and cancels the order when the
// reservation is rejected; a "keep" reason keeps the order, a "fail" reason
// fails the compensation.
func orderSaga(withRejectionHandler bool) *berth.Processor {
	p := &berth.Processor{Name: "OrderSaga", Kind: berth.Saga}
	p.On("onOrderPlaced", "OrderPlaced", func(c *berth.Context) error {
		var order struct {
			Item string `json:"item"`
			Fail bool   `json:"fail"`
		}
		if err := c.Event.Decode(&order); err != nil {
			return err
		}
		if err := c.Commands.Send(berth.Command{AggregateType: "Stock", AggregateID: order.Item, Type: "ReserveStock",
			Payload: []byte(`{"order":"` + c.Event.AggregateID + `"}`)}); err != nil {
			return err
		}
		if order.Fail {
			return errBoom
		}
		return c.Commands.Send(berth.Command{AggregateType: "Audit", AggregateID: "log", Type: "Note"})
	})
	if withRejectionHandler {
		p.OnRejected("onRejected", func(c *berth.Context, r berth.Rejection) error {
			switch r.Reason {
			case "fail":
				return errCannotCancel
			case "keep":
				return nil
			}
			return c.Commands.Send(berth.Command{AggregateType: "Order", AggregateID: c.Event.AggregateID, Type: "CancelOrder",
				Payload: []byte(`{"reason":"` + r.Reason + `","requestId":"` + r.RequestID + `","key":"` + c.InvocationKey + `"}`)})
		})
	}
	return p
}

func TestSagaRejections(t *testing.T) {
	reserve := berthtest.Command{AggregateType: "Stock", Type: "ReserveStock"}
	cancel := berthtest.Command{AggregateType: "Order", AggregateID: "o-1", Type: "CancelOrder"}
	tests := []struct {
		name       string
		handler    bool           // the saga has a rejection handler
		reject     map[string]int // command type -> status
		reason     string
		fail       bool // the saga's handler fails after sending
		wantTypes  []string
		wantReject int
		wantErr    error
	}{
		{"accepted", true, nil, "", false, []string{"ReserveStock", "Note"}, 0, nil},
		{"rejected then compensated", true, map[string]int{"ReserveStock": 409}, "out of stock", false,
			[]string{"ReserveStock", "CancelOrder", "Note"}, 1, nil},
		{"rejected with 422", true, map[string]int{"ReserveStock": 422}, "no such item", false,
			[]string{"ReserveStock", "CancelOrder", "Note"}, 1, nil},
		{"rejection handler sends nothing", true, map[string]int{"ReserveStock": 409}, "keep", false,
			[]string{"ReserveStock", "Note"}, 1, nil},
		{"rejection handler fails", true, map[string]int{"ReserveStock": 409}, "fail", false,
			[]string{"ReserveStock"}, 1, errCannotCancel},
		{"no rejection handler", false, map[string]int{"ReserveStock": 409}, "out of stock", false,
			[]string{"ReserveStock", "Note"}, 1, nil},
		{"handler fails: nothing sent, nothing rejected", true, map[string]int{"ReserveStock": 409}, "out of stock", true, nil, 0, errBoom},
		{"a rejected compensation is not delivered again", true, map[string]int{"ReserveStock": 409, "CancelOrder": 409}, "out of stock", false,
			[]string{"ReserveStock", "CancelOrder", "Note"}, 2, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := berthtest.New(t, orderSaga(tt.handler))
			for typ, status := range tt.reject {
				spec.Commands.RejectWith(berthtest.Command{Type: typ}, status, tt.reason)
			}
			then := spec.WhenEvent(berthtest.Event{Type: "OrderPlaced", AggregateType: "Order", AggregateID: "o-1", Version: 3,
				Payload: map[string]any{"item": "sku-9", "fail": tt.fail}})
			if tt.wantErr != nil {
				then.ExpectErrorIs(tt.wantErr)
			} else {
				then.ExpectNoError()
			}
			var types []string
			for _, c := range then.Commands {
				types = append(types, c.Type)
			}
			if strings.Join(types, ",") != strings.Join(tt.wantTypes, ",") {
				t.Errorf("commands %v, want %v", types, tt.wantTypes)
			}
			if len(then.Rejections) != tt.wantReject || len(spec.Commands.Rejected()) != tt.wantReject {
				t.Errorf("rejections %+v, want %d", then.Rejections, tt.wantReject)
			}
			if len(spec.Commands.Sent()) != len(tt.wantTypes) {
				t.Errorf("the gateway got %d commands, want %d", len(spec.Commands.Sent()), len(tt.wantTypes))
			}
			if tt.wantReject == 0 {
				then.ExpectNoRejection()
				return
			}
			then.ExpectRejected(reserve)
			r := then.Rejections[0]
			if r.Status != tt.reject["ReserveStock"] || r.Reason != tt.reason || r.EventType != "OrderPlaced" ||
				r.RequestID != "OrderSaga.onOrderPlaced:Order/o-1@3:0/0" || string(r.Command.Payload) != `{"order":"o-1"}` {
				t.Errorf("rejection %+v", r)
			}
			if tt.handler && tt.wantErr == nil && tt.reason != "keep" {
				then.ExpectCommand(berthtest.Command{AggregateType: cancel.AggregateType, AggregateID: cancel.AggregateID, Type: cancel.Type,
					Payload: map[string]string{"reason": tt.reason, "requestId": "OrderSaga.onOrderPlaced:Order/o-1@3:0/0",
						"key": "OrderSaga.onOrderPlaced:Order/o-1@3:0:rejected:0"}})
			}
		})
	}
}

// TestSagaRedeliveryUsesTheSameKeys shows a retry after a failed
// compensation: the same event again sends the same request ids and calls
// the rejection handler with the same key.
func TestSagaRedeliveryUsesTheSameKeys(t *testing.T) {
	spec := berthtest.New(t, orderSaga(true))
	spec.Commands.Reject(berthtest.Command{Type: "ReserveStock"}, "fail")
	placed := berthtest.Event{Type: "OrderPlaced", AggregateType: "Order", AggregateID: "o-1", Payload: map[string]any{"item": "sku-9"}}
	first := spec.WhenEvent(placed).ExpectErrorIs(errCannotCancel)
	second := spec.WhenEvent(placed).ExpectErrorIs(errCannotCancel)
	if first.Rejections[0].RequestID != second.Rejections[0].RequestID || second.Attempt != 2 {
		t.Errorf("request ids %q and %q, attempt %d", first.Rejections[0].RequestID, second.Rejections[0].RequestID, second.Attempt)
	}
}

func TestSagaExpectationsReport(t *testing.T) {
	tests := []struct {
		name    string
		reject  bool
		expect  func(*berthtest.Then)
		wantErr string
	}{
		{"rejected holds", true, func(th *berthtest.Then) { th.ExpectRejected(berthtest.Command{Type: "ReserveStock"}) }, ""},
		{"rejected misses", false, func(th *berthtest.Then) { th.ExpectRejected(berthtest.Command{Type: "ReserveStock"}) },
			"want a rejected command ReserveStock to * *, but none was rejected"},
		{"no rejection holds", false, func(th *berthtest.Then) { th.ExpectNoRejection() }, ""},
		{"no rejection misses", true, func(th *berthtest.Then) { th.ExpectNoRejection() },
			"want no rejected command, but it rejected ReserveStock to Stock sku-9"},
		{"rejected of another type", true, func(th *berthtest.Then) { th.ExpectRejected(berthtest.Command{Type: "Note"}) },
			"want a rejected command Note to * *, but it rejected ReserveStock"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &recorder{}
			spec := berthtest.New(r, orderSaga(true))
			if tt.reject {
				spec.Commands.Reject(berthtest.Command{Type: "ReserveStock"}, "keep")
			}
			tt.expect(spec.WhenEvent(berthtest.Event{Type: "OrderPlaced", AggregateID: "o-1", Payload: map[string]any{"item": "sku-9"}}))
			switch {
			case len(r.fatals) > 0:
				t.Fatalf("fatal: %v", r.fatals)
			case tt.wantErr == "" && len(r.errors) > 0:
				t.Errorf("unexpected report: %v", r.errors)
			case tt.wantErr != "" && (len(r.errors) != 1 || !strings.Contains(r.errors[0], tt.wantErr)):
				t.Errorf("reports = %q, want one containing %q", r.errors, tt.wantErr)
			}
		})
	}
}

// TestRejectionHandlerDirectly delivers a rejection as the host would, to
// test the compensation alone.
func TestRejectionHandlerDirectly(t *testing.T) {
	spec := berthtest.New(t, orderSaga(true))
	rej := berth.Rejection{Command: berth.Command{AggregateType: "Stock", AggregateID: "sku-9", Type: "ReserveStock"},
		Reason: "out of stock", Status: 409, EventType: "OrderPlaced", RequestID: "OrderSaga.onOrderPlaced:o-1@1:0/0"}
	spec.WhenEvent(berthtest.Event{Type: berth.EventCommandRejected, AggregateType: "Order", AggregateID: "o-1", Payload: berth.EncodeRejection(rej)}).
		ExpectNoError().
		ExpectCommand(berthtest.Command{AggregateType: "Order", AggregateID: "o-1", Type: "CancelOrder"})
}
