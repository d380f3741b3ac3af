// Package summary is the benchmark handler's logic, shared by the native
// benchmark and the WebAssembly sample so that both run the same code:
// decode a ~300-byte order event and total its lines.
package summary

import (
	"encoding/json"
	"fmt"
)

// Order is the event payload.
type Order struct {
	OrderID  string `json:"orderId"`
	BuyerID  string `json:"buyerId"`
	Currency string `json:"currency"`
	Lines    []Line `json:"lines"`
	Address  struct {
		Street  string `json:"street"`
		City    string `json:"city"`
		Country string `json:"country"`
	} `json:"address"`
}

// Line is one order line.
type Line struct {
	SKU      string `json:"sku"`
	Quantity int    `json:"quantity"`
	Cents    int64  `json:"cents"`
}

// Payload is a representative ~300-byte event.
var Payload = []byte(`{"orderId":"ord-000042","buyerId":"buyer-7","currency":"EUR","lines":[{"sku":"SKU-1001","quantity":2,"cents":1999},{"sku":"SKU-2002","quantity":1,"cents":4550},{"sku":"SKU-3003","quantity":5,"cents":299},{"sku":"SKU-4004","quantity":1,"cents":12000}],"address":{"street":"1 Harbour Road","city":"Rotterdam","country":"NL"}}`)

// Total decodes the order and returns its total in cents.
func Total(payload []byte) (int64, error) {
	var o Order
	if err := json.Unmarshal(payload, &o); err != nil {
		return 0, fmt.Errorf("decode order: %w", err)
	}
	var total int64
	for _, l := range o.Lines {
		total += int64(l.Quantity) * l.Cents
	}
	if total <= 0 {
		return 0, fmt.Errorf("order %s has no value", o.OrderID)
	}
	return total, nil
}
