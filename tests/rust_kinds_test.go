package tests

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testbuild"
)

// TestProjectionEndToEndRust runs samples/order-summary-rs, the OrderSummary
// projection in Rust, on the built host as TestProjectionEndToEnd runs the Go
// one: its read model over REST, exact across a crash, rebuilt by a reset.
func TestProjectionEndToEndRust(t *testing.T) {
	wasm, err := testbuild.RustBytes("samples/order-summary-rs")
	if err != nil {
		t.Fatal(err)
	}
	h := newHost(t, hostConfig{})
	var info moduleInfo
	h.must(201, "PUT", "/v1/modules/order-summary", wasm, "Content-Type", "application/wasm").JSON(t, &info)
	if info.Kind != "projection" || len(info.Subscriptions) != 1 || info.Subscriptions[0] != summarySub {
		t.Fatalf("module %+v", info)
	}
	for i := range 6 {
		buyer := []string{"ann", "bob"}[i%2]
		order := fmt.Sprintf("o-%d", i)
		h.appendOrder(t, order, buyer, "OrderPlaced", 100*(i+1))
		if i < 3 {
			h.appendOrder(t, order, buyer, "OrderShipped", 0)
		}
	}
	want := map[string]buyerSummary{"ann": {3, 2, 900}, "bob": {3, 1, 1200}}
	h.waitSummaries(t, want)

	h.Kill()
	h = h.restart(t)
	h.appendOrder(t, "o-6", "ann", "OrderPlaced", 1000)
	want["ann"] = buyerSummary{4, 2, 1900}
	h.waitSummaries(t, want)

	if r := h.request("POST", "/v1/subscriptions/"+summarySub+"/reset", map[string]any{"position": 1}); r.Status >= 300 {
		t.Fatalf("reset: %s", r)
	}
	h.waitSummaries(t, want)
	var order struct {
		Buyer   string `json:"buyer"`
		Total   int64  `json:"total"`
		Shipped bool   `json:"shipped"`
	}
	h.must(200, "GET", "/v1/projections/"+summarySub+"/order%2Fo-0", nil).JSON(t, &order)
	if order.Buyer != "ann" || order.Total != 100 || !order.Shipped {
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
	eventuallyNil(t, 30*time.Second, func() error { return svc.got("CancelOrder", 1) })
	eventuallyNil(t, 30*time.Second, func() error { return svc.got("ReserveStock", 3) })

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
