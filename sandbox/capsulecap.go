package sandbox

import (
	"fmt"
	"sort"

	"github.com/berthhq/berth/wasm/abi"
)

// capsuleBodyKeep is what the size cap leaves of each body it cuts.
const capsuleBodyKeep = 1024

// capCapsule brings c's encoding within maxBytes (0 or less: no cap),
// cutting in this order until it fits: every body to its first
// capsuleBodyKeep bytes, then the later calls, then the later clock
// readings, then the later random bytes. What it cut goes in c.Truncated.
func capCapsule(c *abi.Capsule, maxBytes int) {
	if maxBytes <= 0 {
		return
	}
	fits := func() bool {
		b, err := abi.EncodeCapsule(c)
		return err == nil && len(b) <= maxBytes
	}
	if fits() {
		return
	}
	if n := cutBodies(c); n > 0 {
		c.Truncated = append(c.Truncated, fmt.Sprintf("%d bodies cut to their first %d bytes (size cap %d bytes)", n, capsuleBodyKeep, maxBytes))
		if fits() {
			return
		}
	}
	calls := c.Calls
	if k := keep(len(calls), func(k int) bool { c.Calls = calls[:k]; return fits() }); k < len(calls) {
		c.Calls = calls[:k]
		c.Truncated = append(c.Truncated, fmt.Sprintf("calls from #%d on left out: %d of %d (size cap %d bytes)", k, len(calls)-k, len(calls), maxBytes))
		if k > 0 {
			return
		}
	}
	for _, clk := range []*[]int64{&c.Clock.Nanotime, &c.Clock.Walltime} {
		all := *clk
		k := keep(len(all), func(k int) bool { *clk = all[:k]; return fits() })
		*clk = all[:k]
		if k < len(all) {
			c.Truncated = append(c.Truncated, fmt.Sprintf("clock readings from #%d on left out: %d of %d (size cap %d bytes)", k, len(all)-k, len(all), maxBytes))
			if k > 0 {
				return
			}
		}
	}
	random := c.Random
	if k := keep(len(random), func(k int) bool { c.Random = random[:k]; return fits() }); k < len(random) {
		c.Random = random[:k]
		c.Truncated = append(c.Truncated, fmt.Sprintf("random bytes from #%d on left out: %d of %d (size cap %d bytes)", k, len(random)-k, len(random), maxBytes))
	}
}

// keep returns the largest k in [0, n] for which fits(k) holds (fits is
// monotone), or 0.
func keep(n int, fits func(int) bool) int {
	if fits(n) {
		return n
	}
	return max(sort.Search(n, func(k int) bool { return !fits(k) })-1, 0)
}

// cutBodies cuts every body in c longer than capsuleBodyKeep and returns
// how many it cut.
func cutBodies(c *abi.Capsule) int {
	n := 0
	cut := func(b *abi.Blob) {
		if len(*b) > capsuleBodyKeep {
			*b, n = (*b)[:capsuleBodyKeep], n+1
		}
	}
	for i := range c.Calls {
		call := &c.Calls[i]
		if call.HTTP != nil {
			cut(&call.HTTP.Body)
			if call.HTTP.Response != nil {
				cut(&call.HTTP.Response.Body)
			}
		}
		if call.Reply != nil {
			cut(&call.Reply.Body)
		}
		if call.Command != nil {
			cut(&call.Command.Payload)
		}
		if call.Log != nil {
			cut(&call.Log.Text)
		}
		cut(&call.Value)
	}
	return n
}
