package tests

import (
	"encoding/json"
	"fmt"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/testbuild"
)

// TestProjectionEndToEndRust runs samples/order-summary-rs, the OrderSummary
// projection in Rust, on the built host as TestProjectionEndToEnd runs the Go
// one: its read model over REST, exact across a crash, rebuilt by a reset.
func TestProjectionEndToEndRust(t *testing.T) {
	wasm, err := testbuild.RustBytes("samples/order-summary-rs")
	if err != nil {
		t.Fatal(err)
	}
	if order := projectionStory(t, wasm); order.Buyer != "ann" || order.Total != 100 || !order.Shipped {
		t.Errorf("order o-0 after the reset: %+v", order)
	}
}

// TestSagaCompensatesRust runs samples/order-saga-rs on the built host as
// TestSagaCompensates runs the Go saga: every reservation goes through
// [commands.Stock] with its request id, the rejected one is compensated by
// the Rust rejection handler through [commands.Order] in the same attempt,
// and nothing is parked.
func TestSagaCompensatesRust(t *testing.T) {
	wasm, err := testbuild.RustBytes("samples/order-saga-rs")
	if err != nil {
		t.Fatal(err)
	}
	svc := newCommandService(t, "sku-0")
	h := newHost(t, hostConfig{Extra: fmt.Sprintf("[commands.Stock]\nurl = %q\n\n[commands.Order]\nurl = %q\n",
		svc.srv.URL+"/stock", svc.srv.URL+"/orders")})
	var info moduleInfo
	h.must(201, "PUT", "/v1/modules/order-saga", wasm, "Content-Type", "application/wasm").JSON(t, &info)
	if info.Processor != "OrderSaga" || info.Kind != "saga" || len(info.Subscriptions) != 1 || info.Subscriptions[0] != "OrderSaga.onOrderPlaced" {
		t.Fatalf("upload: %+v; want the saga with one subscription", info)
	}
	items := map[string]string{"o-1": "sku-1", "o-2": "sku-0", "o-3": "sku-3"}
	for _, order := range []string{"o-1", "o-2", "o-3"} {
		h.must(201, "POST", "/v1/events", map[string]any{"aggregateType": "Order", "aggregateId": order,
			"events": []map[string]any{{"type": "OrderPlaced", "data": map[string]any{"item": items[order], "quantity": 1}}}})
	}
	checkfor.Within(t, 30*time.Second, func() error { return svc.got("CancelOrder", 1) })
	checkfor.Within(t, 30*time.Second, func() error { return svc.got("ReserveStock", 3) })

	key := func(order string) string { return "OrderSaga.onOrderPlaced:Order/" + order + "@1:0" }
	for _, c := range svc.of("ReserveStock") {
		order := map[string]string{"sku-1": "o-1", "sku-0": "o-2", "sku-3": "o-3"}[c.AggregateID]
		var p struct {
			Order    string `json:"order"`
			Quantity int    `json:"quantity"`
		}
		json.Unmarshal(c.Payload, &p)
		if c.Path != "/stock" || c.RequestID != key(order)+"/0" || p.Order != order || p.Quantity != 1 {
			t.Errorf("reservation %+v (payload %+v), want request id %s/0 for %s", c, p, key(order), order)
		}
	}
	cancel := svc.of("CancelOrder")[0]
	var p struct {
		Reason string `json:"reason"`
	}
	json.Unmarshal(cancel.Payload, &p)
	if cancel.Path != "/orders" || cancel.AggregateID != "o-2" || cancel.RequestID != key("o-2")+":rejected:0/0" ||
		p.Reason != "stock not reserved: sku-0 is out of stock" {
		t.Errorf("compensation %+v (reason %q)", cancel, p.Reason)
	}
	if parked := h.parked(t); len(parked) != 0 {
		t.Errorf("parked %+v; a rejected command is not a failure", parked)
	}
}
