package main

import (
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/berthhq/berth/guest-sdk/berth"
)

// buyerNotifications is the client of the notification service:
// POST {notifications-url}/buyers/{buyer}/notifications with an
// Idempotency-Key header, so that a retried event is not notified twice, and
// the bearer token notifications-token when one is configured.
type buyerNotifications struct{ c *berth.Context }

func (n buyerNotifications) orderShipped(buyer, order, key string) error {
	base, ok := n.c.Config.Get("notifications-url")
	if !ok {
		return Notification.New("the module has no notifications-url configured")
	}
	body := fmt.Sprintf(`{"order":%q,"event":"shipped"}`, order)
	header := map[string]string{"Content-Type": "application/json", "Idempotency-Key": key}
	if token, ok := n.c.Config.Get("notifications-token"); ok {
		header["Authorization"] = "Bearer " + token
	}
	resp, err := n.c.HTTP.Do(&berth.Request{
		Method: "POST",
		URL:    base + "/buyers/" + url.PathEscape(buyer) + "/notifications",
		Header: header,
		Body:   []byte(body),
	})
	if err != nil {
		return err // classified by the port: refused is systemic, a wait that ran out is backpressure
	}
	switch {
	case resp.Status < 300:
		n.c.Log.Info("buyer notified", "buyer", buyer, "order", order)
		return nil
	case resp.Status == 404 && skipUnknownBuyers:
		n.c.Log.Warn("buyer not known to the notification service: not notified", "buyer", buyer, "order", order)
		return nil
	case resp.Status == 404:
		return UnknownBuyer.Errorf("the notification service does not know buyer %s", buyer)
	case resp.Status == 429:
		after, _ := strconv.Atoi(resp.Header["Retry-After"])
		return berth.Backpressure(Notification.Errorf("the notification service is busy"), time.Duration(after)*time.Second)
	default:
		return Notification.Errorf("the notification service answered %d: %s", resp.Status, resp.Body)
	}
}
