// Command order-saga is a saga: when an order is placed it reserves the
// order's stock, and when the stock service rejects the reservation it
// compensates by cancelling the order.
//
// The saga sends ReserveStock to the Stock aggregate of the ordered item. The
// host sends it to the command gateway of Stock ([commands.Stock] in its
// TOML) with a request id that is the same on every redelivery. When the
// stock service rejects the reservation as a conflict (409, e.g. out of
// stock), the host calls onReservationRejected in the same attempt, which
// sends CancelOrder to the order ([commands.Order]). A 422 means the service
// could not process the command the saga built: that is the saga's bug, not
// the order's, so the compensation fails with InvalidReservation and the
// order is retried, then parked, for someone to look at.
//
// A placed order without an item or a positive quantity can never be
// reserved: InvalidOrder parks it at once, and nothing is sent.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o order-saga.wasm .
// Configure: [commands.Stock] url = "http://…" and [commands.Order] url = "http://…".
package main

import (
	"encoding/json"
	"time"

	"github.com/berthhq/berth/guest-sdk/berth"
)

// Error classes of the saga.
var (
	// InvalidOrder is a placed order the saga cannot reserve stock for: no
	// retry helps.
	InvalidOrder = berth.NewErrorClass("InvalidOrder", nil)
	// InvalidReservation is a reservation the stock service could not
	// process (422): the saga built a bad command.
	InvalidReservation = berth.NewErrorClass("InvalidReservation", nil)
)

// OrderPlaced is the event the saga starts from.
type OrderPlaced struct {
	Item     string `json:"item"`
	Quantity int    `json:"quantity"`
}

// ReserveStock is the command sent to the item's Stock aggregate.
type ReserveStock struct {
	Order    string `json:"order"`
	Quantity int    `json:"quantity"`
}

// CancelOrder is the compensation sent to the Order aggregate.
type CancelOrder struct {
	Reason string `json:"reason"`
}

// Processor is the OrderSaga: three attempts from 500ms apart up to 5s, five
// seconds each, and InvalidOrder parks at once.
func Processor() *berth.Processor {
	p := &berth.Processor{
		Name: "OrderSaga",
		Kind: berth.Saga,
		Retry: berth.Retry{
			MaxAttempts:    3,
			InitialBackoff: 500 * time.Millisecond,
			MaxBackoff:     5 * time.Second,
			Timeout:        5 * time.Second,
			Unrecoverable:  []*berth.ErrorClass{InvalidOrder},
		},
		Errors: []*berth.ErrorClass{InvalidReservation},
	}
	p.On("onOrderPlaced", "OrderPlaced", onOrderPlaced)
	return p.OnRejected("onReservationRejected", onReservationRejected)
}

func onOrderPlaced(c *berth.Context) error {
	var order OrderPlaced
	if err := c.Event.Decode(&order); err != nil {
		return InvalidOrder.Wrap(err)
	}
	if order.Item == "" || order.Quantity <= 0 {
		return InvalidOrder.Errorf("order %s: an item and a positive quantity are required", c.Event.AggregateID)
	}
	payload, err := json.Marshal(ReserveStock{Order: c.Event.AggregateID, Quantity: order.Quantity})
	if err != nil {
		return err
	}
	c.Log.Info("reserving stock", "order", c.Event.AggregateID, "item", order.Item, "quantity", order.Quantity)
	return c.Commands.Send(berth.Command{AggregateType: "Stock", AggregateID: order.Item, Type: "ReserveStock", Payload: payload})
}

func onReservationRejected(c *berth.Context, r berth.Rejection) error {
	if r.Command.Type != "ReserveStock" {
		c.Log.Warn("a command was rejected; nothing to compensate", "command", r.Command.Type, "reason", r.Reason)
		return nil
	}
	if r.Status == 422 {
		return InvalidReservation.Errorf("the stock service could not process %s: %s", r.RequestID, r.Reason)
	}
	var reserve ReserveStock
	if err := json.Unmarshal(r.Command.Payload, &reserve); err != nil || reserve.Order == "" {
		return InvalidReservation.Errorf("the rejected reservation %s names no order", r.RequestID)
	}
	payload, err := json.Marshal(CancelOrder{Reason: "stock not reserved: " + r.Reason})
	if err != nil {
		return err
	}
	c.Log.Info("cancelling order", "order", reserve.Order, "reason", r.Reason)
	return c.Commands.Send(berth.Command{AggregateType: "Order", AggregateID: reserve.Order, Type: "CancelOrder", Payload: payload})
}

func init() { berth.Register(Processor()) }

func main() {}
