package abi_test

import (
	"fmt"

	"github.com/berthhq/berth/wasm/abi"
)

// A host encodes an envelope for berth_handle; the guest decodes it.
func ExampleAppendEvent() {
	ev := abi.Event{Handler: "onOrderShipped", InvocationKey: "ShipmentNotifier.onOrderShipped:o-1@6:0",
		Type: "OrderShipped", AggregateType: "Order", AggregateID: "o-1", Version: 6, Payload: []byte(`{}`)}
	b := abi.AppendEvent(nil, &ev)
	got, err := abi.DecodeEvent(b)
	fmt.Println(got.InvocationKey, err)
	// Output: ShipmentNotifier.onOrderShipped:o-1@6:0 <nil>
}
