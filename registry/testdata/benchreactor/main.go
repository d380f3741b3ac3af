// Command benchreactor is samples/bench's handler as a reactor, for the
// registry's BenchmarkDeliverWasm: the same work (decode a ~300-byte order
// event and total it), so that a reactor and a projection are compared on
// one guest's cost.
package main

import (
	"github.com/berthhq/berth/guest-sdk/berth"
	"github.com/berthhq/berth/samples/bench/summary"
)

func init() {
	p := &berth.Processor{Name: "OrderTotalsReactor", Kind: berth.Reactor}
	p.On("onOrderPlaced", "OrderPlaced", func(c *berth.Context) error {
		_, err := summary.Total(c.Event.Payload)
		return err
	})
	berth.Register(p)
}

func main() {}
