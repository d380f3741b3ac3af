package tests

import (
	"bufio"
	"bytes"
	"fmt"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/testbuild"
	"github.com/berthhq/berth/retry"
)

// misbehavingGuest is samples/misbehaving compiled to wasm, built once.
var misbehavingGuest = sync.OnceValues(func() ([]byte, error) { return testbuild.Bytes("samples/misbehaving") })

// metric returns the value of one series of the host's /metrics, as
// `name{label="value",...}` with the labels in name order; ok is false
// when the host does not report it.
func (h *hostProc) metric(series string) (v float64, ok bool) {
	h.t.Helper()
	r := h.must(200, "GET", "/metrics", nil)
	sc := bufio.NewScanner(bytes.NewReader(r.Body))
	for sc.Scan() {
		if rest, found := strings.CutPrefix(sc.Text(), series+" "); found {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				h.t.Fatalf("metric %s: %v", series, err)
			}
			return v, true
		}
	}
	return 0, false
}

// mustMetric is metric, failing the test when the series is missing.
func (h *hostProc) mustMetric(series string) float64 {
	h.t.Helper()
	v, ok := h.metric(series)
	if !ok {
		h.t.Fatalf("/metrics has no %s", series)
	}
	return v
}

// TestMemoryIsNotPinned runs guests that grow their memory through the
// binary: an instance grown past sandbox.recycle-memory-percent of its
// limit in a successful call, and one that hit its memory limit, are not
// kept in the pool (berth_sandbox_instance_memory_max_bytes stays under the
// recycle size); and after sandbox.idle-timeout the pool is empty.
func TestMemoryIsNotPinned(t *testing.T) {
	wasm, err := misbehavingGuest()
	if err != nil {
		t.Fatal(err)
	}
	const (
		limit   = 32 << 20
		recycle = limit / 4 // recycle-memory-percent = 25
		mod     = `module="misbehaving"`
	)
	h := newHost(t, hostConfig{Extra: `
[sandbox]
idle-timeout = "2s"
recycle-memory-percent = 25
# Compiled before it handles anything: on the interpreter, the switch to
# compiled code would close the echo's instance (reason tier-up) before
# its idle release, whenever the compile ends after the echo.
tier-up = false

[modules.misbehaving]
memory-limit = "32MiB"

[subscriptions."Misbehaving.memoryHog".retry]
max-attempts = 2
initial-backoff = "10ms"
`})
	h.must(201, "PUT", "/v1/modules/misbehaving", wasm, "Content-Type", "application/wasm")
	if got := h.mustMetric(`berth_sandbox_memory_limit_bytes{` + mod + `}`); got != limit {
		t.Fatalf("memory limit metric %v, want %d", got, limit)
	}
	appendEvent := func(id, typ string, data any) {
		h.must(201, "POST", "/v1/events", map[string]any{
			"aggregateType": "Thing", "aggregateId": id,
			"events": []map[string]any{{"type": typ, "data": data}},
		})
	}
	closed := func(reason string) float64 {
		return h.mustMetric(`berth_sandbox_instances_closed_total{` + mod + `,reason="` + reason + `"}`)
	}
	noneGrown := func(after string) {
		t.Helper()
		if got := h.mustMetric(`berth_sandbox_instance_memory_max_bytes{` + mod + `}`); got >= recycle {
			t.Errorf("after %s an idle instance holds %v bytes, at or above the recycle size %d", after, got, recycle)
		}
	}

	// A successful call that grew its instance to 12 of 32 MiB, over 25 %:
	// the instance is closed, not pooled.
	appendEvent("grow-1", "Grow", map[string]int{"mib": 12})
	checkfor.Within(t, 30*time.Second, func() error {
		if n := closed("memory"); n < 1 {
			return fmt.Errorf("%v instances closed for their memory, want the grown one", n)
		}
		return nil
	})
	noneGrown("a call that grew to 12 MiB")

	// A guest that grows until memory.grow fails: each attempt fails with
	// berth.MemoryExceeded, its instance is closed, and the aggregate parks.
	appendEvent("hog-1", "Hog", map[string]any{})
	var rec parkedRecord
	checkfor.Within(t, 60*time.Second, func() error { return h.fetched(t, "/v1/subscriptions/Misbehaving.memoryHog/parked/Thing/hog-1", &rec) })
	if len(rec.Error.Classes) == 0 || rec.Error.Classes[0] != retry.ClassMemoryExceeded || rec.Attempts != 2 {
		t.Errorf("parked record: classes %v after %d attempts, want berth.MemoryExceeded after 2", rec.Error.Classes, rec.Attempts)
	}
	if got := closed("failed"); got < 2 {
		t.Errorf("%v instances closed after a failed call, want at least the 2 attempts of the hog", got)
	}
	noneGrown("two attempts at the memory limit")

	// An ordinary call leaves its instance pooled (the pool is empty before
	// it: every instance so far was closed); after the idle timeout the
	// pool shrinks to nothing, by an idle release.
	idleBefore := closed("idle")
	appendEvent("echo-1", "Echo", map[string]any{})
	checkfor.Within(t, 30*time.Second, func() error {
		if lag := h.subscriptionLag(t, "Misbehaving.echo"); lag != 0 {
			return fmt.Errorf("the echo %d events behind", lag)
		}
		return nil
	})
	checkfor.Within(t, 30*time.Second, func() error {
		idle := h.mustMetric(`berth_sandbox_instances{` + mod + `,state="idle"}`)
		busy := h.mustMetric(`berth_sandbox_instances{` + mod + `,state="busy"}`)
		if c := closed("idle"); idle != 0 || busy != 0 || c <= idleBefore {
			return fmt.Errorf("the idle pool not released: %v idle, %v busy, %v closed idle (was %v)", idle, busy, c, idleBefore)
		}
		return nil
	})
	if got := h.mustMetric(`berth_sandbox_instance_memory_bytes{` + mod + `}`); got != 0 {
		t.Errorf("an empty pool holds %v bytes", got)
	}
}

// subscriptionLag returns the lag of the subscription name.
func (h *hostProc) subscriptionLag(t testing.TB, name string) uint64 {
	t.Helper()
	var st subscriptionStatus
	h.must(200, "GET", "/v1/subscriptions/"+name, nil).JSON(t, &st)
	return st.Lag
}
