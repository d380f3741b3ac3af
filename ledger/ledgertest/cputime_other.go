//go:build !unix

package ledgertest

import "time"

// cpuTime is not measured here: the cpu-µs/op metric reads 0.
func cpuTime() time.Duration { return 0 }
