package berthtest_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/guest-sdk/berth"
	"github.com/berthhq/berth/guest-sdk/berthtest"
	"github.com/berthhq/berth/wasm/abi"
)

// The capsules in testdata are written by hand to the format (see
// TestTestdataCapsulesAreTheFormat); the Rust kit's tests replay them too.
const (
	unknownBuyerCapsule = "testdata/unknown-buyer.capsule.json"
	deadlineCapsule     = "testdata/deadline.capsule.json"
)

// Versions of the spec's ShipmentNotifier (samples/shipment-notifier).
const (
	parksUnknownBuyers = iota // the module that parked: a 404 is UnknownBuyer
	skipsUnknownBuyers        // the fix: a 404 is nobody to notify
	looksBuyersUp             // a fix that asks the service about the buyer first
)

func notifier(version int) *berth.Processor {
	p := &berth.Processor{Name: "ShipmentNotifier", Kind: berth.Reactor,
		Retry: berth.Retry{MaxAttempts: 5, Timeout: 10 * time.Second, Unrecoverable: []*berth.ErrorClass{unknownBuyer}}}
	return p.On("onOrderShipped", "OrderShipped", func(c *berth.Context) error {
		base, ok := c.Config.Get("notifications-url")
		if !ok {
			return notification.New("the module has no notifications-url configured")
		}
		buyer := base + "/buyers/" + url.PathEscape(c.Event.OwnerID)
		if version == looksBuyersUp {
			if _, err := c.HTTP.Do(&berth.Request{Method: "GET", URL: buyer}); err != nil {
				return err
			}
		}
		resp, err := c.HTTP.Do(&berth.Request{Method: "POST", URL: buyer + "/notifications",
			Header: map[string]string{"Content-Type": "application/json", "Idempotency-Key": c.InvocationKey},
			Body:   fmt.Appendf(nil, `{"order":%q,"event":"shipped"}`, c.Event.AggregateID)})
		switch {
		case err != nil:
			return err
		case resp.Status == 404 && version == skipsUnknownBuyers:
			c.Log.Warn("unknown buyer, not notified", "buyer", c.Event.OwnerID)
			return nil
		case resp.Status == 404:
			return unknownBuyer.Errorf("the notification service does not know buyer %s", c.Event.OwnerID)
		case resp.Status >= 300:
			return notification.Errorf("the notification service answered %d", resp.Status)
		}
		return nil
	})
}

func TestReplayReproducesARecordedFailure(t *testing.T) {
	r := berthtest.Replay(t, notifier(parksUnknownBuyers), unknownBuyerCapsule).
		ExpectReproduced(t).
		ExpectErrorIs(t, unknownBuyer).
		ExpectNoDeparture(t)
	if len(r.Calls) != 2 || r.Calls[0].Fn != abi.CallConfig || r.Calls[1].HTTP == nil {
		t.Fatalf("calls %+v, want the config read and the POST", r.Calls)
	}
	post := r.Calls[1]
	if post.HTTP.Response == nil || post.HTTP.Response.Status != 404 || post.Reply.Code != "ok" {
		t.Errorf("the POST was answered %+v, %+v; want the recorded 404", post.HTTP.Response, post.Reply)
	}
	if got := headerValue(post.HTTP.Headers, "Idempotency-Key"); got != "ShipmentNotifier.onOrderShipped:Order/o-7@6:0" {
		t.Errorf("Idempotency-Key %q, want the capsule's invocation key", got)
	}
	if r.Recorded.Message != r.Outcome.Message || !errors.Is(r.Err, notification) {
		t.Errorf("outcome %+v, err %v; recorded %+v", r.Outcome, r.Err, r.Recorded)
	}
}

func TestReplayOfAFixThatSkipsUnknownBuyers(t *testing.T) {
	r := berthtest.Replay(t, notifier(skipsUnknownBuyers), unknownBuyerCapsule).ExpectSuccess(t).ExpectNoDeparture(t)
	var http []abi.CapsuleCall
	for _, c := range r.Calls {
		if c.Fn == abi.CallHTTP {
			http = append(http, c)
		}
	}
	if len(http) != 1 || http[0].HTTP.Method != "POST" {
		t.Errorf("HTTP calls %+v, want the one recorded POST", http)
	}
	if last := r.Calls[len(r.Calls)-1]; last.Fn != abi.CallLog || last.Log.Level != "warn" {
		t.Errorf("last call %+v, want the warning", last)
	}
	if r.Reproduced() {
		t.Errorf("a success reproduces the recorded failure")
	}
}

func TestReplayListsARequestTheRecordingHasNoAnswerFor(t *testing.T) {
	r := berthtest.Replay(t, notifier(looksBuyersUp), unknownBuyerCapsule)
	if len(r.Departures) != 1 {
		t.Fatalf("departures %v, want the GET", r.Departures)
	}
	d := r.Departures[0]
	if d.Index != 1 || d.Call.HTTP.Method != "GET" || d.Call.HTTP.URL != "http://notifications.test/buyers/buyer-404" ||
		d.Call.Reply.Message != "not recorded in the capsule" || d.Recorded == nil || d.Recorded.HTTP.Method != "POST" {
		t.Errorf("departure %+v", d)
	}
	if want := `call #1 GET http://notifications.test/buyers/buyer-404: not recorded: answered error "not recorded in the capsule"`; d.String() != want {
		t.Errorf("departure says %q, want %q", d, want)
	}
	if !errors.Is(r.Err, berth.ClassHost) || !strings.HasSuffix(r.Err.Error(), ": not recorded in the capsule") {
		t.Errorf("the handler got %v, want a host error saying the call was not recorded", r.Err)
	}

	rec := &recorder{}
	r.ExpectReproduced(rec).ExpectSuccess(rec).ExpectNoDeparture(rec).ExpectErrorIs(rec, berth.ClassHost)
	if len(rec.errors) != 3 || !strings.Contains(rec.errors[0], "want the recorded outcome, it failed with class UnknownBuyer < Notification") ||
		!strings.Contains(rec.errors[0], "departed at call #1 GET") {
		t.Errorf("reported %q", rec.errors)
	}
}

func TestReplayOfADeadlineStopsTheHandlerInTheCall(t *testing.T) {
	r := berthtest.Replay(t, notifier(parksUnknownBuyers), deadlineCapsule).ExpectReproduced(t).ExpectErrorIs(t, berth.ClassTimeout)
	if len(r.Calls) != 2 || !r.Calls[1].Deadline || r.Calls[1].Reply != nil {
		t.Errorf("calls %+v, want the POST marked as the one the deadline passed in", r.Calls)
	}
	if !strings.Contains(r.Err.Error(), "call #1, POST http://notifications.test/buyers/buyer-42/notifications") {
		t.Errorf("error %v", r.Err)
	}
}

// TestTestdataCapsulesAreTheFormat checks the hand-written capsules against
// abi.Capsule: no field the format does not have, and the same capsule
// built in Go and encoded with abi.EncodeCapsule decodes to the same value.
func TestTestdataCapsulesAreTheFormat(t *testing.T) {
	for _, path := range []string{unknownBuyerCapsule, deadlineCapsule} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		var strict abi.Capsule
		if err := dec.Decode(&strict); err != nil {
			t.Errorf("%s: %v", path, err)
		}
	}
	built := unknownBuyer404()
	enc, err := abi.EncodeCapsule(built)
	if err != nil {
		t.Fatal(err)
	}
	fromGo, err := abi.DecodeCapsule(enc)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(unknownBuyerCapsule)
	byHand, err := abi.DecodeCapsule(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fromGo, byHand) {
		t.Errorf("%s is not the capsule abi.EncodeCapsule writes:\n%s", unknownBuyerCapsule, enc)
	}
}

// unknownBuyer404 is testdata/unknown-buyer.capsule.json built in Go.
func unknownBuyer404() *abi.Capsule {
	ev := abi.Event{Handler: "onOrderShipped", InvocationKey: "ShipmentNotifier.onOrderShipped:Order/o-7@6:0", Attempt: 1,
		Type: "OrderShipped", AggregateType: "Order", AggregateID: "o-7", Version: 6, OwnerID: "buyer-404", Position: 41,
		TimeUnixNano: 1796479390000000000, DeadlineUnixNano: 1796479400000000000, Payload: []byte(`{"carrier":"DHL"}`)}
	ctype := abi.Header{Name: "Content-Type", Value: "application/json"}
	return &abi.Capsule{
		RecordedAt:   time.Date(2026, 12, 5, 14, 3, 10, 412e6, time.UTC),
		Host:         "berth-1",
		Subscription: "ShipmentNotifier.onOrderShipped",
		Module:       abi.CapsuleModule{Name: "shipment-notifier", Version: 3, SHA256: "5d41402abc4b2a76b9719d911017c592ae61c3a1e7d1e0a1f5c43e4b0f1b2c3d"},
		Limits:       abi.CapsuleLimits{TimeoutMillis: 10000, MemoryLimitPages: 256, AllowedHosts: []string{"notifications.test"}},
		Event:        abi.CapsuleEventOf(&ev),
		Calls: []abi.CapsuleCall{
			{Fn: abi.CallConfig, Key: "notifications-url", Reply: abi.CapsuleReplyOf(&abi.Reply{Body: []byte("http://notifications.test")})},
			{Fn: abi.CallHTTP, HTTP: &abi.CapsuleHTTP{Method: "POST", URL: "http://notifications.test/buyers/buyer-404/notifications",
				Headers:  []abi.Header{ctype, {Name: "Idempotency-Key", Value: ev.InvocationKey}},
				Body:     abi.Blob(`{"order":"o-7","event":"shipped"}`),
				Response: &abi.CapsuleHTTPRes{Status: 404, Headers: []abi.Header{ctype}, Body: abi.Blob(`{"error":"no such buyer"}`)}},
				Reply: abi.CapsuleReplyOf(&abi.Reply{})},
		},
		Clock:  abi.CapsuleClock{Walltime: []int64{1796479390250000000}, Nanotime: []int64{812000, 4517000}},
		Random: abi.Blob{0x9f, 0x00, 0x3c, 0xe1, 0x42, 0x17, 0xaa, 0x05},
		Outcome: abi.CapsuleOutcome{Kind: "failure", Classes: []string{"UnknownBuyer", "Notification"},
			Message: "the notification service does not know buyer buyer-404"},
		RedactedHeaders: []string{"Authorization", "Cookie", "Proxy-Authorization"},
	}
}

func headerValue(hs []abi.Header, name string) string {
	for _, h := range hs {
		if h.Name == name {
			return h.Value
		}
	}
	return ""
}
