package main

import (
	"errors"
	"testing"

	"github.com/berthhq/berth/guest-sdk/berthtest"
)

func order(id string, version uint64, typ string, payload any) berthtest.Event {
	return berthtest.Event{Type: typ, AggregateType: "Order", AggregateID: id, Version: version, OwnerID: "buyer-42", Payload: payload}
}

func TestTheSummaryCountsPlacedAndShippedOrders(t *testing.T) {
	spec := berthtest.New(t, Processor())

	spec.WhenEvent(order("o-1", 1, "OrderPlaced", placed{Total: 1999})).
		ExpectNoError().
		ExpectState(Key("buyer-42"), Summary{Orders: 1, Total: 1999})
	spec.WhenEvent(order("o-2", 1, "OrderPlaced", placed{Total: 2999})).
		ExpectNoError().
		ExpectState(Key("buyer-42"), Summary{Orders: 2, Total: 4998})
	spec.WhenEvent(order("o-1", 2, "OrderShipped", nil)).
		ExpectNoError().
		ExpectState(Key("buyer-42"), Summary{Orders: 2, Shipped: 1, Total: 4998}).
		ExpectState(OrderKey("o-1"), Order{Buyer: "buyer-42", Total: 1999, Shipped: true}).
		ExpectState(OrderKey("o-2"), Order{Buyer: "buyer-42", Total: 2999})
}

// A summary that does not decode fails the call after the order was
// written: the failed attempt leaves the read model as it was.
func TestAFailedCallWritesNothing(t *testing.T) {
	spec := berthtest.New(t, Processor())
	spec.KV.Set(Key("buyer-42"), "not a summary")

	spec.WhenEvent(order("o-1", 1, "OrderPlaced", placed{Total: 1999})).
		ExpectError().
		ExpectNoState(OrderKey("o-1"))
}

func TestAFailedWriteLeavesTheSummaryAsItWas(t *testing.T) {
	spec := berthtest.New(t, Processor())
	spec.KV.Set(Key("buyer-42"), Summary{Orders: 1, Total: 100})
	full := errors.New("the store is full")
	spec.KV.Fail(full)

	spec.WhenEvent(order("o-2", 1, "OrderPlaced", placed{Total: 50})).
		ExpectErrorIs(full).
		ExpectState(Key("buyer-42"), Summary{Orders: 1, Total: 100})
	spec.WhenEvent(order("o-2", 1, "OrderPlaced", placed{Total: 50})).
		ExpectNoError().
		ExpectState(Key("buyer-42"), Summary{Orders: 2, Total: 150})
}

func TestAnOrderWithoutOwnerIsInNoSummary(t *testing.T) {
	spec := berthtest.New(t, Processor())
	ev := order("o-3", 1, "OrderPlaced", placed{Total: 10})
	ev.OwnerID = ""

	spec.WhenEvent(ev).ExpectNoError().ExpectNoState(Key(""))
	if keys := spec.KV.Keys(); len(keys) != 0 {
		t.Errorf("keys %v, want none", keys)
	}
}

func TestABadPayloadFails(t *testing.T) {
	spec := berthtest.New(t, Processor())

	spec.WhenEvent(order("o-4", 1, "OrderPlaced", `{"total":"lots"}`)).
		ExpectError().
		ExpectNoState(Key("buyer-42"))
}
