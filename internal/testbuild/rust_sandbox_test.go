package testbuild_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/guest-sdk/berth"
	"github.com/berthhq/berth/guest-sdk/berthtest"
	"github.com/berthhq/berth/hostspec"
	"github.com/berthhq/berth/internal/testbuild"
	"github.com/berthhq/berth/wasm/abi"
)

// rustBuilds holds, by crate, a function that builds the crate's module
// once per test binary.
var rustBuilds sync.Map

// rustSpec loads the compiled module of the Rust crate in the host's sandbox
// (the host refuses a module that does not match ABI.md).
func rustSpec(t *testing.T, crate string, opts ...hostspec.Option) *berthtest.Spec {
	t.Helper()
	build, _ := rustBuilds.LoadOrStore(crate, sync.OnceValues(func() ([]byte, error) { return testbuild.RustBytes(crate) }))
	wasm, err := build.(func() ([]byte, error))()
	if err != nil {
		t.Fatal(err)
	}
	return hostspec.New(t, wasm, opts...)
}

// rustNotifierSpec is the compiled Rust ShipmentNotifier with its
// notification service faked on the host's side.
func rustNotifierSpec(t *testing.T, opts ...hostspec.Option) *berthtest.Spec {
	spec := rustSpec(t, "samples/shipment-notifier-rs", opts...)
	spec.Config["notifications-url"] = "http://notifications.test"
	return spec
}

func rustShipped() berthtest.Event {
	return berthtest.Event{Type: "OrderShipped", AggregateType: "Order", AggregateID: "order-7", Version: 6,
		OwnerID: "buyer-42", Payload: map[string]string{"carrier": "DHL"}}
}

// TestRustNotifierInTheSandbox runs the Rust module through the host's
// sandbox with the Go sample's scenarios (hostspec/samples_test.go): the
// same answers from a module of the other language.
func TestRustNotifierInTheSandbox(t *testing.T) {
	const buyerURL = "http://notifications.test/buyers/buyer-42/notifications"
	notification := berth.NewErrorClass("Notification", nil)
	unknownBuyer := berth.NewErrorClass("UnknownBuyer", notification)

	t.Run("its description", func(t *testing.T) {
		p := rustNotifierSpec(t).Processor
		if p.Name != "ShipmentNotifier" || p.Kind != berth.Reactor || p.Retry.Timeout != 10*time.Second ||
			p.Retry.MaxAttempts != 5 || p.Retry.InitialBackoff != time.Second || p.Retry.MaxBackoff != 30*time.Second ||
			len(p.Retry.Unrecoverable) != 1 || p.Retry.Unrecoverable[0].Name() != "UnknownBuyer" ||
			p.Retry.Unrecoverable[0].Parent().Name() != "Notification" {
			t.Errorf("processor %+v", p)
		}
		if h := p.HandlerFor("OrderShipped"); h == nil || h.Name != "onOrderShipped" {
			t.Errorf("handler for OrderShipped: %+v", h)
		}
	})
	t.Run("a failed notification is asked for again with the same key", func(t *testing.T) {
		spec := rustNotifierSpec(t)
		spec.HTTP.FailTimeout(0)
		spec.WhenEvent(rustShipped()).ExpectErrorClass(berth.ClassWaitTimeout).ExpectBackpressure(0)
		then := spec.WhenEvent(rustShipped()).ExpectNoError().ExpectRequest("POST", buyerURL)
		all := spec.HTTP.Requests()
		want := abi.InvocationKey("ShipmentNotifier.onOrderShipped", "Order", "order-7", 6, 0)
		if len(all) != 2 || all[0].Header["Idempotency-Key"] != want || all[1].Header["Idempotency-Key"] != want {
			t.Errorf("requests %+v, want two with Idempotency-Key %s", all, want)
		}
		if then.Attempt != 2 || then.Key != want {
			t.Errorf("attempt %d key %s", then.Attempt, then.Key)
		}
		if got := string(then.Requests[0].Body); got != `{"order":"order-7","event":"shipped"}` {
			t.Errorf("body %s", got)
		}
		lines := spec.Log.Lines()
		if len(lines) != 1 || lines[0].Level != "info" || lines[0].Msg != "buyer notified buyer=buyer-42 order=order-7" {
			t.Errorf("log lines %+v", lines)
		}
	})
	t.Run("an unknown buyer is unrecoverable", func(t *testing.T) {
		spec := rustNotifierSpec(t)
		spec.HTTP.RespondTo(buyerURL, berthtest.Reply(404, `{"error":"no such buyer"}`))
		then := spec.WhenEvent(rustShipped()).ExpectErrorClass(unknownBuyer).ExpectErrorClass(notification)
		if f := then.Result.Failure; strings.Join(f.Classes, " ") != "UnknownBuyer Notification" || !strings.Contains(f.Message, "buyer-42") {
			t.Errorf("failure %+v", f)
		}
	})
	t.Run("a busy service is backpressure", func(t *testing.T) {
		spec := rustNotifierSpec(t)
		spec.HTTP.Respond(berthtest.Reply(429, "", "Retry-After", "2"))
		spec.WhenEvent(rustShipped()).ExpectErrorClass(notification).ExpectBackpressure(2 * time.Second)
	})
	t.Run("a refused connection is systemic", func(t *testing.T) {
		spec := rustNotifierSpec(t)
		spec.HTTP.FailRefused()
		spec.WhenEvent(rustShipped()).ExpectErrorClass(berth.ClassConnectionRefused).ExpectSystemic()
	})
	t.Run("a host not allowed is denied", func(t *testing.T) {
		spec := rustNotifierSpec(t, hostspec.WithAllowedHosts("elsewhere.test"))
		spec.WhenEvent(rustShipped()).ExpectErrorClass(berth.ClassOutboundDenied).ExpectNoRequest()
	})
	t.Run("an order without owner notifies nobody", func(t *testing.T) {
		ev := rustShipped()
		ev.OwnerID = ""
		rustNotifierSpec(t).WhenEvent(ev).ExpectNoError().ExpectNoRequest()
	})
	t.Run("without a notifications url it fails", func(t *testing.T) {
		rustSpec(t, "samples/shipment-notifier-rs").WhenEvent(rustShipped()).ExpectErrorClass(notification).ExpectNoRequest()
	})
}
