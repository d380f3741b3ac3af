package main

import (
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/berthhq/berth/config"
)

// cgroupFiles are where a memory cgroup says its limit: v2, then v1.
var cgroupFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// memoryLimit is the soft memory limit the host sets from
// server.memory-limit (0: none): 90 % of the cgroup's limit when that is
// lower, so the collector works harder before the kernel kills the host.
func memoryLimit(configured config.Size, cgroup int64) int64 {
	limit := int64(configured)
	if limit > 0 && cgroup > 0 && cgroup/10*9 < limit {
		limit = cgroup / 10 * 9
	}
	return limit
}

// cgroupMemoryLimit is the memory cgroup's limit in bytes; 0 when there is
// none (no file, "max", or v1's "no limit" of nearly 2^63).
func cgroupMemoryLimit() int64 {
	for _, f := range cgroupFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil || n <= 0 || n >= math.MaxInt64/2 {
			return 0
		}
		return n
	}
	return 0
}

// applyMemoryLimit sets the Go runtime's soft memory limit from the
// configuration, at a start and at each reload. A GOMEMLIMIT in the
// environment is the operator's word for the same thing, and wins.
func applyMemoryLimit(cfg *config.Config, log *slog.Logger) {
	if os.Getenv("GOMEMLIMIT") != "" {
		log.Info("GOMEMLIMIT is set; server.memory-limit is not applied", "GOMEMLIMIT", os.Getenv("GOMEMLIMIT"))
		return
	}
	limit := memoryLimit(cfg.Server.MemoryLimit, cgroupMemoryLimit())
	if limit <= 0 {
		limit = math.MaxInt64 // Go's own "no limit"
	}
	debug.SetMemoryLimit(limit)
}
