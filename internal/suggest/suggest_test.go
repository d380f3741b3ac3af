package suggest

import (
	"slices"
	"testing"
)

func TestClosest(t *testing.T) {
	subs := []string{"ShipmentNotifier.onOrderShipped", "Billing.onInvoiceSent"}
	tests := []struct {
		name       string
		candidates []string
		want       string
	}{
		{"ShipmentNotifier.onOrderShiped", subs, "ShipmentNotifier.onOrderShipped"},
		{"shipmentnotifier.onordershipped", subs, "ShipmentNotifier.onOrderShipped"}, // 4 edits in 31 bytes: close
		{"Billing", subs, ""}, // 14 edits in 7 bytes: too far
		{"Billing.onInvoice", subs, "Billing.onInvoiceSent"},
		{"Nope.nope", subs, ""},
		{"anything", nil, ""},
		{"", []string{"a"}, "a"},
	}
	for _, tt := range tests {
		if got := Closest(tt.name, tt.candidates); got != tt.want {
			t.Errorf("Closest(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestNearest(t *testing.T) {
	classes := []string{"PaymentDeclined", "PaymentTimeout", "PaymentDelayed", "ShipmentLost"}
	if got := Nearest("PaymentDeclinde", classes, 2); !slices.Equal(got, []string{"PaymentDeclined", "PaymentDelayed"}) {
		t.Errorf("Nearest = %q", got)
	}
	if got := Nearest("Nothing.like.them", classes, 3); got != nil {
		t.Errorf("Nearest of a far name = %q, want none", got)
	}
}
