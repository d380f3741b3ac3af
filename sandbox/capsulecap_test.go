package sandbox

import (
	"fmt"
	"strings"
	"testing"

	"github.com/berthhq/berth/wasm/abi"
)

// The size cap cuts bodies first, then later calls, then later clock
// readings and random bytes, saying each time what it cut, and leaves a
// capsule within the cap alone.
func TestCapCapsuleOrder(t *testing.T) {
	capsule := func(calls, readings, random int) *abi.Capsule {
		c := &abi.Capsule{Event: abi.CapsuleEvent{Handler: "h", Payload: abi.Blob("{}")}, Random: make(abi.Blob, random)}
		for i := range calls {
			c.Calls = append(c.Calls, abi.CapsuleCall{Fn: abi.CallKVGet, Key: fmt.Sprintf("key-%04d", i), Reply: &abi.CapsuleReply{Code: "ok", Body: abi.Blob(strings.Repeat("v", 2000))}})
		}
		for i := range readings {
			c.Clock.Nanotime = append(c.Clock.Nanotime, int64(1e12+i))
			c.Clock.Walltime = append(c.Clock.Walltime, int64(1.7e18+i))
		}
		return c
	}
	size := func(c *abi.Capsule) int { b, _ := abi.EncodeCapsule(c); return len(b) }
	for _, tc := range []struct {
		name                  string
		calls, readings, rand int
		maxBytes              int
		want                  []string // prefixes of Truncated, in order
	}{
		{"fits", 2, 2, 16, 1 << 20, nil},
		{"bodies", 4, 2, 16, 8 << 10, []string{"4 bodies cut"}},
		{"calls", 200, 2, 16, 16 << 10, []string{"200 bodies cut", "calls from #"}},
		{"clock", 0, 5000, 16, 16 << 10, []string{"nanotime readings from #0 ", "walltime readings from #"}},
		{"random", 0, 0, 64 << 10, 16 << 10, []string{"random bytes from #"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := capsule(tc.calls, tc.readings, tc.rand)
			capCapsule(c, tc.maxBytes)
			if n := size(c); n > tc.maxBytes {
				t.Errorf("%d bytes, cap %d", n, tc.maxBytes)
			}
			if len(c.Truncated) != len(tc.want) {
				t.Fatalf("truncated %q, want %q…", c.Truncated, tc.want)
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(c.Truncated[i], w) {
					t.Errorf("truncated[%d] = %q, want %q…", i, c.Truncated[i], w)
				}
			}
		})
	}
}
