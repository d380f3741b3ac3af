// Command order-summary is a projection: it keeps, per buyer, how many
// orders were placed and shipped and what they came to, in the host's query
// store under "buyer/<ownerId>", and each order under "order/<id>":
//
//	buyer/buyer-42  {"orders":2,"shipped":1,"total":4998}
//	order/o-1       {"buyer":"buyer-42","total":1999,"shipped":true}
//
// One handler takes both event types, so the summary is one read model (each
// handler of a processor is a subscription of its own, with a namespace of
// its own). A projection starts at the beginning of the log; resetting its
// subscription clears the read model and builds it again from the events.
// The host applies a call's writes only when it succeeds, together with the
// mark that the event was applied, so the counts are exact however often an
// event is retried or redelivered.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o order-summary.wasm .
// Read: GET /v1/projections/OrderSummary.onOrder/buyer%2F<buyer>.
package main

import (
	"encoding/json"
	"fmt"

	"github.com/berthhq/berth/guest-sdk/berth"
)

// Summary is the read model of one buyer.
type Summary struct {
	Orders  int   `json:"orders"`  // OrderPlaced events
	Shipped int   `json:"shipped"` // OrderShipped events
	Total   int64 `json:"total"`   // the placed orders' totals, in cents
}

// placed is the payload of OrderPlaced.
type placed struct {
	Total int64 `json:"total"` // in cents
}

// Processor is the OrderSummary projection.
func Processor() *berth.Processor {
	p := &berth.Processor{Name: "OrderSummary", Kind: berth.Projection}
	p.On("onOrder", "OrderPlaced", onOrder)
	h := p.Handler("onOrder")
	h.EventTypes = append(h.EventTypes, "OrderShipped")
	return p
}

// Key is the read model's key of a buyer's summary.
func Key(buyer string) string { return "buyer/" + buyer }

// OrderKey is the read model's key of one order.
func OrderKey(id string) string { return "order/" + id }

// Order is the read model of one order.
type Order struct {
	Buyer   string `json:"buyer"`
	Total   int64  `json:"total"` // in cents
	Shipped bool   `json:"shipped"`
}

func onOrder(c *berth.Context) error {
	buyer := c.Event.OwnerID
	if buyer == "" {
		return nil // an order nobody owns is in nobody's summary
	}
	var o Order
	if err := get(c.KV, OrderKey(c.Event.AggregateID), &o); err != nil {
		return err
	}
	o.Buyer = buyer
	switch c.Event.Type {
	case "OrderPlaced":
		var ev placed
		if err := c.Event.Decode(&ev); err != nil {
			return err
		}
		o.Total = ev.Total
	case "OrderShipped":
		o.Shipped = true
	}
	if err := put(c.KV, OrderKey(c.Event.AggregateID), o); err != nil {
		return err
	}
	var s Summary
	if err := get(c.KV, Key(buyer), &s); err != nil {
		return err
	}
	switch c.Event.Type {
	case "OrderPlaced":
		s.Orders++
		s.Total += o.Total
	case "OrderShipped":
		s.Shipped++
	}
	return put(c.KV, Key(buyer), s)
}

// get reads key into v, leaving v as it is when the key has no value.
func get(kv berth.KV, key string, v any) error {
	b, ok, err := kv.Get(key)
	if err != nil || !ok {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	return nil
}

func put(kv berth.KV, key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return kv.Put(key, b)
}

func init() { berth.Register(Processor()) }

func main() {}
