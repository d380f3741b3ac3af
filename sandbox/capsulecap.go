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
// capsuleBodyKeep bytes, then the later calls, then the later monotonic
// and wall-clock readings, then the later random bytes. What it cut goes
// in c.Truncated.
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
	// cut leaves out items from some index k on, k as large as lets the
	// capsule fit with the note that says so, and reports whether it fits.
	cut := func(what string, n int, set func(k int)) bool {
		base := c.Truncated[:len(c.Truncated):len(c.Truncated)]
		try := func(k int) bool {
			set(k)
			c.Truncated = append(base, fmt.Sprintf("%s from #%d on left out: %d of %d (size cap %d bytes)", what, k, n-k, n, maxBytes))
			return fits()
		}
		if n == 0 {
			return false
		}
		return try(keep(n, try))
	}
	calls, nano, wall, random := c.Calls, c.Clock.Nanotime, c.Clock.Walltime, c.Random
	_ = cut("calls", len(calls), func(k int) { c.Calls = calls[:k] }) ||
		cut("nanotime readings", len(nano), func(k int) { c.Clock.Nanotime = nano[:k] }) ||
		cut("walltime readings", len(wall), func(k int) { c.Clock.Walltime = wall[:k] }) ||
		cut("random bytes", len(random), func(k int) { c.Random = random[:k] })
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
