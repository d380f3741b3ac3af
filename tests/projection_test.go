package tests

import (
	"encoding/json"
	"fmt"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/testbuild"
)

// The order-summary projection through the built host: its read model over
// REST, exact across a crash, and rebuilt by a reset.

const summarySub = "OrderSummary.onOrder"

// orderSummaryWasm is samples/order-summary, built once per test binary.
var orderSummaryWasm = sync.OnceValues(func() ([]byte, error) { return testbuild.Bytes("samples/order-summary") })

type buyerSummary struct {
	Orders  int   `json:"orders"`
	Shipped int   `json:"shipped"`
	Total   int64 `json:"total"`
}

func (h *hostProc) appendOrder(t testing.TB, order, buyer, typ string, total int) {
	t.Helper()
	h.must(201, "POST", "/v1/events", map[string]any{
		"aggregateType": "Order", "aggregateId": order, "ownerId": buyer,
		"events": []map[string]any{{"type": typ, "data": map[string]int{"total": total}}},
	})
}

// waitSummaries waits until the read model holds want for every buyer, and
// the projection has handled the whole log.
func (h *hostProc) waitSummaries(t testing.TB, want map[string]buyerSummary) {
	t.Helper()
	checkfor.Within(t, 30*time.Second, func() error {
		var st subscriptionStatus
		if r := h.request("GET", "/v1/subscriptions/"+summarySub, nil); r.Status != 200 || json.Unmarshal(r.Body, &st) != nil || st.Lag != 0 || st.Unread != "" {
			return fmt.Errorf("the projection not caught up: %s", r)
		}
		for buyer, w := range want {
			r := h.request("GET", "/v1/projections/"+summarySub+"/buyer%2F"+buyer, nil)
			var got buyerSummary
			if r.Status != 200 || json.Unmarshal(r.Body, &got) != nil || got != w {
				return fmt.Errorf("%s's summary: %s, want %+v", buyer, r, w)
			}
		}
		return nil
	})
}

func TestProjectionEndToEnd(t *testing.T) {
	wasm, err := orderSummaryWasm()
	if err != nil {
		t.Fatal(err)
	}
	if order := projectionStory(t, wasm); order.Buyer != "ann" || !order.Shipped {
		t.Errorf("order o-0 after the reset: %+v", order)
	}
}

// summaryOrder is an order's entry in the OrderSummary read model.
type summaryOrder struct {
	Buyer   string `json:"buyer"`
	Total   int64  `json:"total"`
	Shipped bool   `json:"shipped"`
}

// projectionStory runs an OrderSummary module (Go or Rust) on the built
// host: its read model over REST, a page at a time, exact across a crash,
// rebuilt by a reset; it returns order o-0 as the rebuilt model has it.
func projectionStory(t *testing.T, wasm []byte) summaryOrder {
	t.Helper()
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

	// The listing, a page at a time.
	var page struct {
		Entries []struct {
			Key   string          `json:"key"`
			Value json.RawMessage `json:"value"`
		} `json:"entries"`
		Next string `json:"next"`
	}
	h.must(200, "GET", "/v1/projections/"+summarySub+"?prefix=buyer%2F&limit=1", nil).JSON(t, &page)
	if len(page.Entries) != 1 || page.Entries[0].Key != "buyer/ann" || page.Next != "buyer/ann" {
		t.Fatalf("first page %+v", page)
	}
	h.must(200, "GET", "/v1/projections/"+summarySub+"?prefix=buyer%2F&limit=1&after=buyer%2Fann", nil).JSON(t, &page)
	if len(page.Entries) != 1 || page.Entries[0].Key != "buyer/bob" {
		t.Fatalf("second page %+v", page)
	}
	h.must(404, "GET", "/v1/projections/"+summarySub+"/buyer%2Fcy", nil)

	// A crash (SIGKILL) redelivers what the checkpoint had not recorded;
	// nothing is applied twice, and what came in meanwhile is not lost.
	h.Kill()
	h = h.restart(t)
	h.appendOrder(t, "o-6", "ann", "OrderPlaced", 1000)
	want["ann"] = buyerSummary{4, 2, 1900}
	h.waitSummaries(t, want)

	// A reset to the beginning clears the read model in the same step and
	// builds it again.
	if r := h.request("POST", "/v1/subscriptions/"+summarySub+"/reset", map[string]any{"position": 1}); r.Status >= 300 {
		t.Fatalf("reset: %s", r)
	}
	h.waitSummaries(t, want)
	var order summaryOrder
	h.must(200, "GET", "/v1/projections/"+summarySub+"/order%2Fo-0", nil).JSON(t, &order)
	return order
}
