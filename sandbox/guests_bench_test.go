package sandbox

import (
	"sync"
	"testing"

	"github.com/berthhq/berth/internal/testing/testbuild"
	"github.com/berthhq/berth/wasm/abi"
)

// notifierGuest is the spec's ShipmentNotifier in one language, for the
// figures that set a Go guest beside a Rust one (issue 21).
type notifierGuest struct {
	name string // the sub-benchmark's: notifier-go, notifier-rs
	pkg  string
}

var notifierGuests = []notifierGuest{
	{"notifier-go", "samples/shipment-notifier"},
	{"notifier-rs", "samples/shipment-notifier-rs"},
}

// rustNotifier is the Rust notifier's module, built once per test binary
// (cargo is slow to say that nothing changed).
var rustNotifier = sync.OnceValues(func() ([]byte, error) { return testbuild.RustBytes("samples/shipment-notifier-rs") })

// wasm is the guest's module: the Go one built by TestMain, the Rust one by
// cargo.
func (g notifierGuest) wasm(t testing.TB) []byte {
	t.Helper()
	if g.name == "notifier-go" {
		return wasmOf(t, g.pkg)
	}
	b, err := rustNotifier()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// shippedNoOwner is an OrderShipped with no buyer: in both languages the
// notifier's handler returns at once, so a call of it is the round trip of
// a no-op handler (the same envelope as noopEvent's, the owner aside).
func shippedNoOwner() *abi.Event {
	ev := orderPlaced()
	ev.Handler, ev.Type, ev.OwnerID = "onOrderShipped", "OrderShipped", ""
	ev.InvocationKey = "ShipmentNotifier.onOrderShipped:Order/ord-000042@1:0"
	return ev
}
