package hostspec_test

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/guest-sdk/berth"
	"github.com/berthhq/berth/guest-sdk/berthtest"
	"github.com/berthhq/berth/hostspec"
	"github.com/berthhq/berth/internal/testing/testbuild"
)

// modules maps the sample packages to their compiled bytes, built once:
// the Go samples, and the Rust twins (samples/NAME-rs) of those in
// rustTwins.
var modules map[string][]byte

// rustTwins are the samples written in Rust too: their scenarios below run
// against both compiled modules, the same code for either language.
var rustTwins = []string{"samples/shipment-notifier", "samples/order-saga", "samples/order-summary"}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "berth-hostspec-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := func() int {
		defer os.RemoveAll(dir)
		paths, err := testbuild.All(dir, "samples/shipment-notifier", "samples/order-saga", "samples/order-summary", "samples/misbehaving")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		modules = map[string][]byte{}
		for pkg, path := range paths {
			if modules[pkg], err = os.ReadFile(path); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
		}
		for _, pkg := range rustTwins {
			if modules[pkg+"-rs"], err = testbuild.RustBytes(pkg + "-rs"); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
		}
		return m.Run()
	}()
	os.Exit(code)
}

// The ShipmentNotifier's classes, declared by name as the module declares
// them: expectations match classes by name.
var (
	notification = berth.NewErrorClass("Notification", nil)
	unknownBuyer = berth.NewErrorClass("UnknownBuyer", notification)
)

const (
	order         = "order-7"
	buyer         = "buyer-42"
	notifications = "http://notifications.test"
	buyerURL      = notifications + "/buyers/" + buyer + "/notifications"
)

// eachLanguage runs f as subtests go and rust, with the compiled module of
// the sample pkg and with that of its Rust twin: a module author of either
// language tests with the same scenarios against the real sandbox.
func eachLanguage(t *testing.T, pkg string, f func(t *testing.T, module []byte)) {
	t.Helper()
	t.Run("go", func(t *testing.T) { f(t, modules[pkg]) })
	t.Run("rust", func(t *testing.T) { f(t, modules[pkg+"-rs"]) })
}

// eachNotifier runs f with each compiled ShipmentNotifier.
func eachNotifier(t *testing.T, f func(t *testing.T, module []byte)) {
	t.Helper()
	eachLanguage(t, "samples/shipment-notifier", f)
}

// reactorSpec is a compiled ShipmentNotifier with its notification
// service faked on the host side.
func reactorSpec(t *testing.T, module []byte, opts ...hostspec.Option) *berthtest.Spec {
	spec := hostspec.New(t, module, opts...)
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
	eachNotifier(t, func(t *testing.T, module []byte) {
		spec := reactorSpec(t, module)
		spec.HTTP.Fail(errors.New("the mail service is down"))

		then := spec.WhenEvent(shipped()).ExpectErrorClass(berth.ClassHost)
		if !strings.Contains(then.Result.Failure.Message, "the mail service is down") {
			t.Errorf("failure %q does not say why", then.Result.Failure.Message)
		}
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
	})
}

func TestAnUnknownBuyerIsUnrecoverable(t *testing.T) {
	eachNotifier(t, func(t *testing.T, module []byte) {
		spec := reactorSpec(t, module)
		spec.HTTP.RespondTo(buyerURL, berthtest.Reply(404, `{"error":"no such buyer"}`))

		spec.WhenEvent(shipped()).
			ExpectRequest("POST", buyerURL).
			ExpectErrorClass(unknownBuyer).
			ExpectErrorClass(notification).
			ExpectErrorIs(unknownBuyer)
	})
}

func TestABusyServiceIsBackpressure(t *testing.T) {
	eachNotifier(t, func(t *testing.T, module []byte) {
		spec := reactorSpec(t, module)
		spec.HTTP.Respond(berthtest.Reply(429, "", "Retry-After", "2"))

		spec.WhenEvent(shipped()).ExpectErrorClass(notification).ExpectBackpressure(2 * time.Second)
		spec.WhenEvent(shipped()).ExpectNoError()
	})
}

func TestARefusedConnectionIsSystemic(t *testing.T) {
	eachNotifier(t, func(t *testing.T, module []byte) {
		spec := reactorSpec(t, module)
		spec.HTTP.FailRefused()

		spec.WhenEvent(shipped()).ExpectErrorClass(berth.ClassConnectionRefused).ExpectSystemic()
		if sent := spec.HTTP.Sent(); len(sent) != 0 {
			t.Errorf("a refused request reached the service: %+v", sent)
		}
	})
}

func TestAWaitThatRanOutIsBackpressure(t *testing.T) {
	eachNotifier(t, func(t *testing.T, module []byte) {
		spec := reactorSpec(t, module)
		spec.HTTP.FailTimeout(0)

		spec.WhenEvent(shipped()).ExpectErrorClass(berth.ClassWaitTimeout).ExpectBackpressure(0)
	})
}

func TestTheNotificationNamesTheOrderAndIsLogged(t *testing.T) {
	eachNotifier(t, func(t *testing.T, module []byte) {
		spec := reactorSpec(t, module)

		then := spec.WhenEvent(shipped()).ExpectNoError().ExpectRequest("POST", buyerURL)
		if got, want := string(then.Requests[0].Body), `{"order":"order-7","event":"shipped"}`; got != want {
			t.Errorf("body = %s, want %s", got, want)
		}
		if got := then.Requests[0].Header["Content-Type"]; got != "application/json" {
			t.Errorf("Content-Type = %q", got)
		}
		// Both SDKs send their fields as fields (ABI.md, log), which the
		// host logs apart from the message.
		lines := spec.Log.Lines()
		if len(lines) != 1 || lines[0].Level != "info" || lines[0].Key != then.Key || lines[0].Msg != "buyer notified" ||
			fmt.Sprint(lines[0].KV) != fmt.Sprint([]any{"buyer", buyer, "order", order}) {
			t.Errorf("log lines %+v", lines)
		}
	})
}

func TestWithoutANotificationsURLItFails(t *testing.T) {
	eachNotifier(t, func(t *testing.T, module []byte) {
		spec := hostspec.New(t, module)

		spec.WhenEvent(shipped()).ExpectErrorClass(notification).ExpectNoRequest()
	})
}

func TestAHostNotAllowedIsDenied(t *testing.T) {
	eachNotifier(t, func(t *testing.T, module []byte) {
		spec := reactorSpec(t, module, hostspec.WithAllowedHosts("elsewhere.test"))

		spec.WhenEvent(shipped()).ExpectErrorClass(berth.ClassOutboundDenied).ExpectNoRequest()
	})
}

func TestTheDescriptionIsTheModules(t *testing.T) {
	eachNotifier(t, func(t *testing.T, module []byte) {
		spec := reactorSpec(t, module)
		p := spec.Processor
		if p.Name != "ShipmentNotifier" || p.Kind != berth.Reactor || p.Retry.Timeout != 10*time.Second ||
			p.Retry.MaxAttempts != 5 || len(p.Retry.Unrecoverable) != 1 || p.Retry.Unrecoverable[0].Name() != "UnknownBuyer" {
			t.Errorf("processor %+v", p)
		}
		if h := p.HandlerFor("OrderShipped"); h == nil || h.Name != "onOrderShipped" {
			t.Errorf("handler for OrderShipped: %+v", h)
		}
	})
}

// The order saga, compiled: a rejected reservation is compensated in the
// module's rejection handler, in the same delivery.
const placedOrder = "o-1"

func placed(payload any) berthtest.Event {
	return berthtest.Event{Type: "OrderPlaced", AggregateType: "Order", AggregateID: placedOrder, Version: 1, Payload: payload}
}

var (
	invalidOrder       = berth.NewErrorClass("InvalidOrder", nil)
	invalidReservation = berth.NewErrorClass("InvalidReservation", nil)
	reserve            = berthtest.Command{AggregateType: "Stock", AggregateID: "sku-9", Type: "ReserveStock",
		Payload: map[string]any{"order": placedOrder, "quantity": 2}}
	cancel = berthtest.Command{AggregateType: "Order", AggregateID: placedOrder, Type: "CancelOrder",
		Payload: map[string]string{"reason": "stock not reserved: out of stock"}}
)

func TestOrderSaga(t *testing.T) {
	eachLanguage(t, "samples/order-saga", func(t *testing.T, module []byte) {
		item := map[string]any{"item": "sku-9", "quantity": 2}
		tests := []struct {
			name    string
			payload any
			reject  int // the stock service's status for ReserveStock; 0 accepts
			expect  func(*berthtest.Then)
		}{
			{"reserves stock", item, 0, func(th *berthtest.Then) {
				th.ExpectNoError().ExpectCommand(reserve).ExpectNoRejection()
			}},
			{"cancels the order when the reservation is rejected", item, 409, func(th *berthtest.Then) {
				th.ExpectNoError().ExpectRejected(reserve).ExpectCommand(reserve).ExpectCommand(cancel)
			}},
			{"a reservation the service cannot process is the saga's bug", item, 422, func(th *berthtest.Then) {
				th.ExpectErrorClass(invalidReservation).ExpectRejected(reserve)
			}},
			{"an order without an item sends nothing", map[string]any{"quantity": 2}, 0, func(th *berthtest.Then) {
				th.ExpectErrorClass(invalidOrder).ExpectNoCommand()
			}},
			{"an order that does not decode sends nothing", `{"item": 9}`, 0, func(th *berthtest.Then) {
				th.ExpectErrorClass(invalidOrder).ExpectNoCommand()
			}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				spec := hostspec.New(t, module)
				if tt.reject != 0 {
					spec.Commands.RejectWith(berthtest.Command{Type: "ReserveStock"}, tt.reject, "out of stock")
				}
				tt.expect(spec.WhenEvent(placed(tt.payload)))
			})
		}
	})
}

func TestARetriedCompensationUsesTheSameKeys(t *testing.T) {
	eachLanguage(t, "samples/order-saga", func(t *testing.T, module []byte) {
		spec := hostspec.New(t, module)
		spec.Commands.Reject(berthtest.Command{Type: "ReserveStock"}, "out of stock")
		ev := placed(map[string]any{"item": "sku-9", "quantity": 2})

		spec.WhenEvent(ev).ExpectNoError().ExpectRejected(reserve).ExpectCommand(cancel)
		spec.WhenEvent(ev).ExpectNoError().ExpectCommand(cancel)

		rejected := spec.Commands.Rejected()
		if len(rejected) != 2 || rejected[0].RequestID != "OrderSaga.onOrderPlaced:Order/o-1@1:0/0" || rejected[1].RequestID != rejected[0].RequestID {
			t.Errorf("rejections %+v", rejected)
		}
		// Each line is tagged with its delivery's key; both SDKs send their
		// fields as fields.
		var lines []string
		for _, l := range spec.Log.Lines() {
			lines = append(lines, fmt.Sprint(l.Key, " ", l.Msg, " ", l.KV))
		}
		want := "OrderSaga.onOrderPlaced:Order/o-1@1:0 reserving stock [order o-1 item sku-9 quantity 2]\n" +
			"OrderSaga.onOrderPlaced:Order/o-1@1:0:rejected:0 cancelling order [order o-1 reason out of stock]"
		if len(lines) < 2 || strings.Join(lines[:2], "\n") != want {
			t.Errorf("log %q, want the first two lines %q", lines, want)
		}
	})
}

func TestAFailedSendFailsTheDelivery(t *testing.T) {
	eachLanguage(t, "samples/order-saga", func(t *testing.T, module []byte) {
		spec := hostspec.New(t, module)
		spec.Commands.Fail(berthtest.Refused("POST http://stock.test/commands"))

		spec.WhenEvent(placed(map[string]any{"item": "sku-9", "quantity": 2})).
			ExpectErrorClass(berth.ClassConnectionRefused).ExpectSystemic().ExpectNoCommand()
	})
}

// The order summary, compiled: a projection's read model in spec.KV.
type summary struct {
	Orders  int   `json:"orders"`
	Shipped int   `json:"shipped"`
	Total   int64 `json:"total"`
}

type orderView struct {
	Buyer   string `json:"buyer"`
	Total   int64  `json:"total"`
	Shipped bool   `json:"shipped"`
}

func orderEvent(id string, version uint64, typ string, payload any) berthtest.Event {
	return berthtest.Event{Type: typ, AggregateType: "Order", AggregateID: id, Version: version, OwnerID: buyer, Payload: payload}
}

func TestTheSummaryCountsPlacedAndShippedOrders(t *testing.T) {
	eachLanguage(t, "samples/order-summary", func(t *testing.T, module []byte) {
		spec := hostspec.New(t, module)

		spec.WhenEvent(orderEvent("o-1", 1, "OrderPlaced", map[string]int{"total": 1999})).
			ExpectNoError().
			ExpectState("buyer/"+buyer, summary{Orders: 1, Total: 1999})
		spec.WhenEvent(orderEvent("o-2", 1, "OrderPlaced", map[string]int{"total": 2999})).
			ExpectNoError().
			ExpectState("buyer/"+buyer, summary{Orders: 2, Total: 4998})
		spec.WhenEvent(orderEvent("o-1", 2, "OrderShipped", nil)).
			ExpectNoError().
			ExpectState("buyer/"+buyer, summary{Orders: 2, Shipped: 1, Total: 4998}).
			ExpectState("order/o-1", orderView{Buyer: buyer, Total: 1999, Shipped: true}).
			ExpectState("order/o-2", orderView{Buyer: buyer, Total: 2999})
	})
}

func TestAFailedCallWritesNothing(t *testing.T) {
	eachLanguage(t, "samples/order-summary", func(t *testing.T, module []byte) {
		spec := hostspec.New(t, module)
		spec.KV.Set("buyer/"+buyer, "not a summary")

		spec.WhenEvent(orderEvent("o-1", 1, "OrderPlaced", map[string]int{"total": 1999})).
			ExpectError().
			ExpectNoState("order/o-1")
	})
}

func TestABusyStoreIsBackpressureAndWritesNothing(t *testing.T) {
	eachLanguage(t, "samples/order-summary", func(t *testing.T, module []byte) {
		spec := hostspec.New(t, module)
		spec.KV.Set("buyer/"+buyer, summary{Orders: 1, Total: 100})
		spec.KV.Fail(berthtest.TimedOut("kv get", 0))

		spec.WhenEvent(orderEvent("o-2", 1, "OrderPlaced", map[string]int{"total": 50})).
			ExpectErrorClass(berth.ClassWaitTimeout).
			ExpectBackpressure(0).
			ExpectState("buyer/"+buyer, summary{Orders: 1, Total: 100})
		spec.WhenEvent(orderEvent("o-2", 1, "OrderPlaced", map[string]int{"total": 50})).
			ExpectNoError().
			ExpectState("buyer/"+buyer, summary{Orders: 2, Total: 150})
	})
}
