// Command eachevent is a projection for the registry's tests: it writes one
// key per event, reads none (so no call's reads are changed by another and
// none is run again for a conflict), and logs "handled attempt=<n>" on
// every call, so that a test counts the calls of each event from the host's
// log.
package main

import (
	"github.com/berthhq/berth/guest-sdk/berth"
)

func init() {
	p := &berth.Processor{Name: "EachEvent", Kind: berth.Projection}
	p.On("onEvent", "Happened", func(c *berth.Context) error {
		c.Log.Info("handled", "attempt", c.Attempt)
		return c.KV.Put("event/"+c.InvocationKey, []byte("1"))
	})
	berth.Register(p)
}

func main() {}
