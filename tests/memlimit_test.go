package tests

import (
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestMemoryLimitFollowsTheConfig: a host on the default configuration
// runs under a soft memory limit of 512MiB (90 % of a lower cgroup limit),
// which a reload changes and "0B" turns off, as /metrics'
// go_gc_gomemlimit_bytes shows; a GOMEMLIMIT in the host's environment
// wins over the key, also at a reload.
func TestMemoryLimitFollowsTheConfig(t *testing.T) {
	const mib = 1 << 20
	h := newHost(t, hostConfig{})
	limit := func() float64 { return h.mustMetric("go_gc_gomemlimit_bytes") }
	if got, want := limit(), underCgroup(512*mib); got != want {
		t.Errorf("default limit %.0f, want %.0f", got, want)
	}
	writeFile(t, h.Config, "[server]\nmemory-limit = \"256MiB\"\n")
	h.must(200, "POST", "/v1/config/reload", nil)
	if got, want := limit(), underCgroup(256*mib); got != want {
		t.Errorf("limit after a reload to 256MiB: %.0f, want %.0f", got, want)
	}
	writeFile(t, h.Config, "[server]\nmemory-limit = \"0B\"\n")
	h.must(200, "POST", "/v1/config/reload", nil)
	if got := limit(); got != math.MaxInt64 {
		t.Errorf("limit after a reload to 0B: %.0f, want none (%d)", got, int64(math.MaxInt64))
	}
	// A bad value is refused and the limit in force stays.
	writeFile(t, h.Config, "[server]\nmemory-limit = \"1MiB\"\n")
	if r := h.request("POST", "/v1/config/reload", nil); r.Status != 400 || !strings.Contains(string(r.Body), "server.memory-limit") {
		t.Errorf("reload with 1MiB: %d %s, want 400 naming server.memory-limit", r.Status, r.Body)
	}
	if got := limit(); got != math.MaxInt64 {
		t.Errorf("limit after a refused reload: %.0f, want none still", got)
	}

	t.Setenv("GOMEMLIMIT", "300MiB")
	e := newHost(t, hostConfig{Extra: "[server]\nmemory-limit = \"256MiB\"\n"})
	if got := e.mustMetric("go_gc_gomemlimit_bytes"); got != 300*mib {
		t.Errorf("limit with GOMEMLIMIT=300MiB: %.0f, want %d", got, 300*mib)
	}
	e.must(200, "POST", "/v1/config/reload", nil)
	if got := e.mustMetric("go_gc_gomemlimit_bytes"); got != 300*mib {
		t.Errorf("limit with GOMEMLIMIT=300MiB after a reload: %.0f, want %d", got, 300*mib)
	}
}

// underCgroup is limit, or 90 % of this machine's memory cgroup limit
// when that is lower: what the host should set.
func underCgroup(limit int64) float64 {
	for _, f := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && n > 0 && n < math.MaxInt64/2 && n/10*9 < limit {
			limit = n / 10 * 9
		}
		break
	}
	return float64(limit)
}
