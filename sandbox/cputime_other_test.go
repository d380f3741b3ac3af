//go:build !unix

package sandbox

import "time"

// cpuTime is not measured here: the CPU metrics of the benchmarks read zero.
func cpuTime() time.Duration { return 0 }
