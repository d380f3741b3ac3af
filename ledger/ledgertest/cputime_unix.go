//go:build unix

package ledgertest

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time (user and system) the process has used: what an
// operation costs, apart from how long it waited for a core on a loaded
// machine (background work of the store, such as compactions, included).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
