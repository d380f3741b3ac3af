package main

import (
	"testing"

	"github.com/berthhq/berth/guest-sdk/berth"
	"github.com/berthhq/berth/guest-sdk/berthtest"
)

const order = "o-1"

func placed(payload any) berthtest.Event {
	return berthtest.Event{Type: "OrderPlaced", AggregateType: "Order", AggregateID: order, Version: 1, Payload: payload}
}

var (
	reserve = berthtest.Command{AggregateType: "Stock", AggregateID: "sku-9", Type: "ReserveStock",
		Payload: map[string]any{"order": order, "quantity": 2}}
	cancel = berthtest.Command{AggregateType: "Order", AggregateID: order, Type: "CancelOrder",
		Payload: map[string]string{"reason": "stock not reserved: out of stock"}}
)

func TestOrderSaga(t *testing.T) {
	tests := []struct {
		name    string
		payload any
		reject  int // the stock service's status for ReserveStock; 0 accepts
		expect  func(*berthtest.Then)
	}{
		{"reserves stock", map[string]any{"item": "sku-9", "quantity": 2}, 0, func(th *berthtest.Then) {
			th.ExpectNoError().ExpectCommand(reserve).ExpectNoRejection()
		}},
		{"cancels the order when the reservation is rejected", map[string]any{"item": "sku-9", "quantity": 2}, 409, func(th *berthtest.Then) {
			th.ExpectNoError().ExpectRejected(reserve).ExpectCommand(cancel)
		}},
		{"a reservation the service cannot process is the saga's bug", map[string]any{"item": "sku-9", "quantity": 2}, 422, func(th *berthtest.Then) {
			th.ExpectErrorClass(InvalidReservation).ExpectRejected(reserve)
		}},
		{"an order without an item sends nothing", map[string]any{"quantity": 2}, 0, func(th *berthtest.Then) {
			th.ExpectErrorClass(InvalidOrder).ExpectNoCommand()
		}},
		{"an order that does not decode sends nothing", `{"item": 9}`, 0, func(th *berthtest.Then) {
			th.ExpectErrorClass(InvalidOrder).ExpectNoCommand()
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := berthtest.New(t, Processor())
			if tt.reject != 0 {
				spec.Commands.RejectWith(berthtest.Command{Type: "ReserveStock"}, tt.reject, "out of stock")
			}
			tt.expect(spec.WhenEvent(placed(tt.payload)))
		})
	}
}

// TestARetriedCompensationUsesTheSameKeys shows that handling the same
// commit again is safe: the same request ids and the same rejection key.
func TestARetriedCompensationUsesTheSameKeys(t *testing.T) {
	spec := berthtest.New(t, Processor())
	spec.Commands.Reject(berthtest.Command{Type: "ReserveStock"}, "out of stock")
	ev := berthtest.Event{Type: "OrderPlaced", AggregateType: "Order", AggregateID: "o-1", Version: 1,
		Payload: map[string]any{"item": "sku-9", "quantity": 2}}
	cancel := berthtest.Command{AggregateType: "Order", AggregateID: "o-1", Type: "CancelOrder",
		Payload: map[string]string{"reason": "stock not reserved: out of stock"}}

	spec.WhenEvent(ev).ExpectNoError().ExpectRejected(berthtest.Command{Type: "ReserveStock"}).ExpectCommand(cancel)
	spec.WhenEvent(ev).ExpectNoError().ExpectCommand(cancel)

	rejected := spec.Commands.Rejected()
	if len(rejected) != 2 || rejected[1].RequestID != "OrderSaga.onOrderPlaced:Order/o-1@1:0/0" {
		t.Errorf("rejections %+v", rejected)
	}
}

// TestAnotherRejectionIsOnlyLogged delivers a rejection of a command the
// saga does not compensate.
func TestAnotherRejectionIsOnlyLogged(t *testing.T) {
	spec := berthtest.New(t, Processor())
	rej := berth.Rejection{Command: berth.Command{AggregateType: "Order", AggregateID: order, Type: "CancelOrder"}, Reason: "already shipped", Status: 409}
	spec.WhenEvent(berthtest.Event{Type: berth.EventCommandRejected, AggregateType: "Order", AggregateID: order, Payload: berth.EncodeRejection(rej)}).
		ExpectNoError().ExpectNoCommand()
}
