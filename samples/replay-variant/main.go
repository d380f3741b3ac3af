// Command replay-variant is a module that differs from others on purpose,
// for the sandbox's replay tests: run against another module's attempt
// capsule it shows how a replay of a candidate fix goes.
//
//   - onOrderShipped is samples/shipment-notifier's handler fixed to treat
//     a buyer the notification service does not know (404) as one to skip:
//     the same request, a success where the original parks.
//   - authorizedCall asks for samples/misbehaving's authorizedCall's
//     service-url with "/v2" appended: a request the recording has no
//     answer for, a departure.
package main

import (
	"fmt"
	"net/url"

	"github.com/berthhq/berth/guest-sdk/berth"
)

func init() {
	p := &berth.Processor{Name: "ReplayVariant", Kind: berth.Reactor}
	p.On("onOrderShipped", "OrderShipped", onOrderShipped)
	p.On("authorizedCall", "AuthorizedCall", func(c *berth.Context) error {
		base, _ := c.Config.Get("service-url")
		resp, err := c.HTTP.Do(&berth.Request{Method: "GET", URL: base + "/v2"})
		if err != nil {
			return err
		}
		if resp.Status >= 300 {
			return fmt.Errorf("the service answered %d", resp.Status)
		}
		return nil
	})
	berth.Register(p)
}

func onOrderShipped(c *berth.Context) error {
	buyer := c.Event.OwnerID
	if buyer == "" {
		return nil
	}
	base, _ := c.Config.Get("notifications-url")
	body := fmt.Sprintf(`{"order":%q,"event":"shipped"}`, c.Event.AggregateID)
	resp, err := c.HTTP.Do(&berth.Request{
		Method: "POST",
		URL:    base + "/buyers/" + url.PathEscape(buyer) + "/notifications",
		Header: map[string]string{"Content-Type": "application/json", "Idempotency-Key": c.InvocationKey},
		Body:   []byte(body),
	})
	if err != nil {
		return err
	}
	switch {
	case resp.Status < 300:
		return nil
	case resp.Status == 404:
		c.Log.Warn("skipping a buyer the notification service does not know", "buyer", buyer)
		return nil
	}
	return fmt.Errorf("the notification service answered %d", resp.Status)
}

func main() {}
