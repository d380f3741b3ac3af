package tests

import (
	"fmt"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestWarmUpTimeoutsAreNotCharged runs, through the binary with sandbox.tier-up on, a guest whose
// handler (samples/misbehaving's cruncher) takes a few milliseconds compiled and tens of times that on
// the interpreter, under a timeout between the two and a budget of one attempt. Its first attempts run
// on the interpreter while the module compiles and time out: that is the host's condition, not the
// handler's, so none is charged — nothing parks, and every event is handled at attempt 1 once the
// module runs compiled code.
func TestWarmUpTimeoutsAreNotCharged(t *testing.T) {
	const events = 3
	h := newHost(t, hostConfig{Extra: `
[sandbox]
tier-up = true

[subscriptions."Misbehaving.cruncher".retry]
max-attempts = 1
timeout = "150ms"
`})
	h.uploadMisbehaving(t)
	// ~4 ms compiled, ~300 ms on the interpreter (more while the compile shares the cores). The
	// timeout is about half the interpreter's time and ~40x the compiled: at 100 ms a compiled call
	// on a machine loaded past its cores (CI beside two CPU burners) once ran past it and was charged.
	for i := range events {
		h.must(201, "POST", "/v1/events", map[string]any{
			"aggregateType": "Crunch", "aggregateId": fmt.Sprintf("c-%d", i),
			"events": []map[string]any{{"type": "Crunch", "data": map[string]int{"n": 1_000_000}}},
		})
	}
	checkfor.Within(t, 60*time.Second, func() error {
		if lag := h.subscriptionLag(t, "Misbehaving.cruncher"); lag != 0 {
			return fmt.Errorf("the cruncher %d events behind", lag)
		}
		return nil
	})
	if got := h.mustMetric(`berth_sandbox_module_compiled{module="misbehaving"}`); got != 1 {
		t.Errorf("berth_sandbox_module_compiled = %v after the events, want 1", got)
	}
	log := h.Stderr()
	// The test means something only if attempts did time out on the interpreter.
	if n := strings.Count(log, "attempt not counted"); n == 0 {
		t.Fatalf("no attempt timed out on the interpreter; host log:\n%s", log)
	}
	if rs := h.parked(t); len(rs) != 0 {
		t.Fatalf("parked %+v, want none: a warm-up timeout was charged", rs)
	}
	attempts := regexp.MustCompile(`msg=crunched [^\n]*fields\.attempt=(\d+)`).FindAllStringSubmatch(log, -1)
	if len(attempts) != events {
		t.Fatalf("%d crunches logged, want %d; host log:\n%s", len(attempts), events, log)
	}
	for _, a := range attempts {
		if a[1] != "1" {
			t.Errorf("an event was handled at attempt %s, want 1 (warm-up attempts are not counted)", a[1])
		}
	}
}
