package registry_test

import (
	"maps"
	"sync"

	"github.com/berthhq/berth/internal/testing/testbuild"
)

// notifierBenchGuests are the spec's ShipmentNotifier in Go and in Rust,
// delivered OrderShipped events without an owner: in both languages the
// handler returns at once, so what is timed is the host around a no-op
// call of each (issue 21).
var notifierBenchGuests = []benchGuest{
	{kind: "notifier-go", pkg: "samples/shipment-notifier", sub: "ShipmentNotifier.onOrderShipped", event: "OrderShipped"},
	{kind: "notifier-rs", pkg: "samples/shipment-notifier-rs", sub: "ShipmentNotifier.onOrderShipped", event: "OrderShipped", rust: true},
}

// notifierBenchWasm builds both notifiers once per test binary.
var notifierBenchWasm = sync.OnceValues(func() (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, g := range notifierBenchGuests {
		build := testbuild.Bytes
		if g.rust {
			build = testbuild.RustBytes
		}
		b, err := build(g.pkg)
		if err != nil {
			return nil, err
		}
		out[g.kind] = b
	}
	return out, nil
})

// deliverWasmGuests are BenchmarkDeliverWasm's guests and their modules:
// samples/bench's as a reactor and a projection, then both notifiers.
func deliverWasmGuests() ([]benchGuest, map[string][]byte, error) {
	bench, err := benchWasm()
	if err != nil {
		return nil, nil, err
	}
	notifiers, err := notifierBenchWasm()
	if err != nil {
		return nil, nil, err
	}
	wasm := maps.Clone(bench)
	maps.Copy(wasm, notifiers)
	return append(append([]benchGuest{}, benchGuests...), notifierBenchGuests...), wasm, nil
}
