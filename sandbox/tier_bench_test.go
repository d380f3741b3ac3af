package sandbox

import (
	"testing"

	"github.com/berthhq/berth/wasm/abi"
)

// BenchmarkTierCall is what a call costs on each tier, as the engine calls:
// the no-op handler (the round trip) and the bench sample's handler (JSON
// decoding and arithmetic). A module that tiered up pays the interpreter's
// cost until its compiled code is ready.
func BenchmarkTierCall(b *testing.B) {
	for _, tier := range tiers {
		for _, h := range []struct {
			name string
			ev   func() *abi.Event
		}{{"noop", noopEvent}, {"bench", orderPlaced}} {
			b.Run(tier+"/"+h.name, func(b *testing.B) {
				m := onTier(b, tier, "samples/bench", Config{MaxInstances: 1}, ModuleConfig{})
				ev := h.ev()
				for b.Loop() {
					if o := engineCall(m, ev); o.Kind != Success {
						b.Fatalf("%v: %s", o.Kind, o.Error())
					}
				}
			})
		}
	}
}
