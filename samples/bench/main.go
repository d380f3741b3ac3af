// Command bench is the benchmark handler: it decodes a ~300-byte order event
// and totals it (see package summary), for BenchmarkInvoke; and a handler
// that does nothing, for BenchmarkNoop, whose cost is the round trip itself.
package main

import (
	"github.com/berthhq/berth/guest-sdk/berth"
	"github.com/berthhq/berth/samples/bench/summary"
)

func init() {
	p := &berth.Processor{Name: "OrderTotals", Kind: berth.Projection}
	p.On("onOrderPlaced", "OrderPlaced", func(c *berth.Context) error {
		_, err := summary.Total(c.Event.Payload)
		return err
	})
	p.On("noop", "Noop", func(*berth.Context) error { return nil })
	berth.Register(p)
}

func main() {}
