// Command shipment-notifier is the ShipmentNotifier reactor that the README
// and the guest SDK's guide tell their story with: it tells the buyer of a
// shipped order that it is on its way.
//
// The notification service is a remote call that may be slow or briefly
// down, so the reactor gives it its own budget: five attempts, from one
// second apart up to thirty, and ten seconds for each, before the order is
// parked for the handler in the failure ledger. A buyer the service does not
// know is a failure no retry can fix, so it parks the order at once.
//
// A reactor starts at the end of the log: deploying it does not notify the
// buyers of the orders shipped before.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o shipment-notifier.wasm .
// Configure: [modules.shipment-notifier] config = { notifications-url = "http://…" }
// (and notifications-token, sent as a bearer token, if the service wants one)
// and allow its host in allowed-hosts.
package main

import (
	"time"

	"github.com/berthhq/berth/guest-sdk/berth"
)

// Error classes of the notification port.
var (
	// Notification is any failure to notify a buyer.
	Notification = berth.NewErrorClass("Notification", nil)
	// UnknownBuyer means the service does not know the buyer: no retry helps.
	UnknownBuyer = berth.NewErrorClass("UnknownBuyer", Notification)
)

// Processor is the ShipmentNotifier reactor with its own retry budget.
func Processor() *berth.Processor {
	p := &berth.Processor{
		Name: "ShipmentNotifier",
		Kind: berth.Reactor,
		Retry: berth.Retry{
			MaxAttempts:    5,
			InitialBackoff: time.Second,
			MaxBackoff:     30 * time.Second,
			Timeout:        10 * time.Second,
			Unrecoverable:  []*berth.ErrorClass{UnknownBuyer},
		},
	}
	return p.On("onOrderShipped", "OrderShipped", onOrderShipped)
}

func onOrderShipped(c *berth.Context) error {
	buyer := c.Event.OwnerID
	if buyer == "" {
		return nil
	}
	return buyerNotifications{c}.orderShipped(buyer, c.Event.AggregateID, c.InvocationKey)
}

func init() { berth.Register(Processor()) }

func main() {}
