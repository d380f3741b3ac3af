package main

import (
	"errors"
	"testing"
	"time"

	"github.com/berthhq/berth/guest-sdk/berth"
	"github.com/berthhq/berth/guest-sdk/berthtest"
)

const (
	order         = "order-7"
	buyer         = "buyer-42"
	notifications = "http://notifications.test"
	buyerURL      = notifications + "/buyers/" + buyer + "/notifications"
)

// reactorSpec is the ShipmentNotifier with its notification service faked.
func reactorSpec(t *testing.T) *berthtest.Spec {
	spec := berthtest.New(t, Processor())
	spec.Config["notifications-url"] = notifications
	return spec
}

// shipped is the sixth commit of the order: it shipped.
func shipped() berthtest.Event {
	return berthtest.Event{
		Type:          "OrderShipped",
		AggregateType: "Order",
		AggregateID:   order,
		Version:       6,
		OwnerID:       buyer,
		Payload:       map[string]string{"carrier": "DHL"},
	}
}

func TestAFailedNotificationShouldBeAskedForAgainWithTheSameKey(t *testing.T) {
	spec := reactorSpec(t)
	mailDown := errors.New("the mail service is down")
	spec.HTTP.Fail(mailDown)

	spec.WhenEvent(shipped()).ExpectErrorIs(mailDown)
	spec.WhenEvent(shipped()).ExpectNoError()

	sent := spec.HTTP.Sent()
	if len(sent) != 1 {
		t.Fatalf("sent %d notifications, want 1", len(sent))
	}
	if got, want := sent[0].Header["Idempotency-Key"], "ShipmentNotifier.onOrderShipped:Order/"+order+"@6:0"; got != want {
		t.Errorf("Idempotency-Key = %q, want %q", got, want)
	}
	if all := spec.HTTP.Requests(); len(all) != 2 || all[0].Header["Idempotency-Key"] != all[1].Header["Idempotency-Key"] {
		t.Errorf("the two attempts did not ask with the same key: %+v", all)
	}
}

func TestAnUnknownBuyerIsUnrecoverable(t *testing.T) {
	spec := reactorSpec(t)
	spec.HTTP.RespondTo(buyerURL, berthtest.Reply(404, `{"error":"no such buyer"}`))

	spec.WhenEvent(shipped()).
		ExpectRequest("POST", buyerURL).
		ExpectErrorClass(UnknownBuyer).
		ExpectErrorClass(Notification)
}

func TestABusyServiceIsBackpressure(t *testing.T) {
	spec := reactorSpec(t)
	spec.HTTP.Respond(berthtest.Reply(429, "", "Retry-After", "2"))

	spec.WhenEvent(shipped()).ExpectErrorClass(Notification).ExpectBackpressure(2 * time.Second)
	spec.WhenEvent(shipped()).ExpectNoError()
}

func TestARefusedConnectionIsSystemic(t *testing.T) {
	spec := reactorSpec(t)
	spec.HTTP.FailRefused()

	spec.WhenEvent(shipped()).ExpectErrorClass(berth.ClassConnectionRefused).ExpectSystemic()
}

func TestAnOrderWithoutOwnerNotifiesNobody(t *testing.T) {
	spec := reactorSpec(t)
	ev := shipped()
	ev.OwnerID = ""

	spec.WhenEvent(ev).ExpectNoError().ExpectNoRequest()
}

func TestTheNotificationNamesTheOrder(t *testing.T) {
	spec := reactorSpec(t)

	then := spec.WhenEvent(shipped()).ExpectNoError().ExpectRequest("POST", buyerURL)
	if got, want := string(then.Requests[0].Body), `{"order":"order-7","event":"shipped"}`; got != want {
		t.Errorf("body = %s, want %s", got, want)
	}
}

func TestWithoutANotificationsURLItFails(t *testing.T) {
	spec := berthtest.New(t, Processor())

	spec.WhenEvent(shipped()).ExpectErrorClass(Notification).ExpectNoRequest()
}
