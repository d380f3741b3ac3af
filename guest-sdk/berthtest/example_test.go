package berthtest_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/berthhq/berth/guest-sdk/berth"
	"github.com/berthhq/berth/guest-sdk/berthtest"
)

// printer stands in for the *testing.T a test passes to berthtest.New: it
// prints what the test would report.
type printer struct{}

func (printer) Helper()                           {}
func (printer) Logf(format string, args ...any)   { fmt.Printf("log: "+format+"\n", args...) }
func (printer) Errorf(format string, args ...any) { fmt.Printf("error: "+format+"\n", args...) }
func (printer) Fatalf(format string, args ...any) { fmt.Printf("fatal: "+format+"\n", args...) }

// A reactor that mails a welcome to new customers, failing while the mail
// service is down: the second delivery of the same event asks again with the
// same invocation key, so the service can tell it is the same mail.
func Example() {
	welcome := &berth.Processor{Name: "Welcome", Kind: berth.Reactor, Retry: berth.Retry{MaxAttempts: 3}}
	welcome.On("onSignedUp", "CustomerSignedUp", func(c *berth.Context) error {
		resp, err := c.HTTP.Do(&berth.Request{
			Method: "POST",
			URL:    "http://mail.test/welcome/" + c.Event.AggregateID,
			Header: map[string]string{"Idempotency-Key": c.InvocationKey},
		})
		if err != nil {
			return err
		}
		if resp.Status == 429 {
			return berth.Backpressure(errors.New("mail service busy"), 5*time.Second)
		}
		return nil
	})

	t := printer{} // in a test: func TestWelcome(t *testing.T)
	spec := berthtest.New(t, welcome)
	signedUp := berthtest.Event{Type: "CustomerSignedUp", AggregateType: "Customer", AggregateID: "c-1", Version: 1}

	mailDown := errors.New("the mail service is down")
	spec.HTTP.Fail(mailDown)
	spec.WhenEvent(signedUp).ExpectErrorIs(mailDown)
	then := spec.WhenEvent(signedUp).ExpectNoError().ExpectRequest("POST", "http://mail.test/welcome/c-1")
	fmt.Println("attempt", then.Attempt, "key", then.Key)

	sent := spec.HTTP.Sent()
	fmt.Println(len(sent), "sent with", sent[0].Header["Idempotency-Key"])

	spec.HTTP.FailRefused()
	spec.WhenEvent(signedUp).ExpectSystemic().ExpectErrorClass(berth.ClassConnectionRefused)
	spec.HTTP.Respond(berthtest.Reply(429, ""))
	spec.WhenEvent(signedUp).ExpectBackpressure(5 * time.Second)
	// Output:
	// attempt 2 key Welcome.onSignedUp:Customer/c-1@1:0
	// 1 sent with Welcome.onSignedUp:Customer/c-1@1:0
}

// A projection keeps a read model; a delivery's writes stay only if its
// handler succeeds, as they are committed with the subscription's checkpoint.
func Example_projection() {
	summary := &berth.Processor{Name: "OrderSummary", Kind: berth.Projection}
	summary.On("onOrderPlaced", "OrderPlaced", func(c *berth.Context) error {
		var order struct {
			Total int `json:"total"`
		}
		if err := c.Event.Decode(&order); err != nil {
			return err
		}
		return c.KV.Put("order/"+c.Event.AggregateID, fmt.Appendf(nil, `{"total":%d,"version":%d}`, order.Total, c.Event.Version))
	})

	spec := berthtest.New(printer{}, summary)
	placed := berthtest.Event{Type: "OrderPlaced", AggregateID: "o-1", Payload: map[string]int{"total": 30}}
	spec.WhenEvent(placed).ExpectNoError().ExpectState("order/o-1", map[string]int{"version": 1, "total": 30})

	spec.KV.Fail(berthtest.TimedOut("kv put", time.Second))
	placed.AggregateID = "o-2"
	spec.WhenEvent(placed).ExpectBackpressure(time.Second).ExpectNoState("order/o-2")
	fmt.Println(spec.KV.Keys())
	// Output:
	// [order/o-1]
}

// A parked failure becomes a regression test: the capsule of the attempt
// that parked (curl …/parked/Order/o-7/capsule > testdata/…) replays
// against the handler natively, the module's version reproducing the
// failure and the fix handling the event with the calls it recorded.
func ExampleReplay() {
	notification := berth.NewErrorClass("Notification", nil)
	unknownBuyer := berth.NewErrorClass("UnknownBuyer", notification)
	notifier := func(skip404 bool) *berth.Processor {
		p := &berth.Processor{Name: "ShipmentNotifier", Kind: berth.Reactor}
		return p.On("onOrderShipped", "OrderShipped", func(c *berth.Context) error {
			base, _ := c.Config.Get("notifications-url")
			resp, err := c.HTTP.Do(&berth.Request{Method: "POST", URL: base + "/buyers/" + c.Event.OwnerID + "/notifications",
				Header: map[string]string{"Content-Type": "application/json", "Idempotency-Key": c.InvocationKey},
				Body:   fmt.Appendf(nil, `{"order":%q,"event":"shipped"}`, c.Event.AggregateID)})
			switch {
			case err != nil:
				return err
			case resp.Status == 404 && skip404:
				return nil // nobody to notify
			case resp.Status == 404:
				return unknownBuyer.Errorf("the notification service does not know buyer %s", c.Event.OwnerID)
			}
			return nil
		})
	}

	t := printer{} // in a test: func TestUnknownBuyerO7(t *testing.T)
	parked := berthtest.Replay(t, notifier(false), "testdata/unknown-buyer.capsule.json").ExpectReproduced(t)
	fmt.Println("reproduced:", parked.Err)

	fixed := berthtest.Replay(t, notifier(true), "testdata/unknown-buyer.capsule.json").ExpectSuccess(t).ExpectNoDeparture(t)
	last := fixed.Calls[len(fixed.Calls)-1]
	fmt.Println("fixed:", last.HTTP.Method, last.HTTP.URL, "answered", last.HTTP.Response.Status)
	// Output:
	// reproduced: the notification service does not know buyer buyer-404
	// fixed: POST http://notifications.test/buyers/buyer-404/notifications answered 404
}
