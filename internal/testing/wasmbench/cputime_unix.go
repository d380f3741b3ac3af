//go:build unix

package wasmbench

import (
	"syscall"
	"time"
)

// CPUTime returns the CPU time (user and system) the process has used, so a
// benchmark can tell what a call costs from how long it waited for a core.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
