//go:build !unix

package wasmbench

import "time"

// CPUTime is not measured here: the CPU metrics of the benchmarks read zero.
func CPUTime() time.Duration { return 0 }
