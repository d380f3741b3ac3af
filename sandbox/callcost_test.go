package sandbox

import (
	"context"
	"testing"
	"time"
)

// TestCallAllocatesNothing: a successful call makes no allocation of its
// own, whoever owns its deadline: the instance's call state, context and
// timer are reused, the result is decoded where the guest left it, and a
// free instance is taken without making a Done channel for the caller's
// context.
func TestCallAllocatesNothing(t *testing.T) {
	s := newSandbox(t, Config{MaxInstances: 1})
	m := load(t, s, "samples/bench", ModuleConfig{})
	attempt, cancel := context.WithTimeoutCause(context.Background(), time.Hour, errAttempt)
	defer cancel()
	for _, tt := range []struct {
		name    string
		ctx     context.Context
		timeout time.Duration
	}{
		{"the caller's deadline", attempt, 0},
		{"the sandbox's own deadline", context.Background(), time.Hour},
		{"no deadline", context.Background(), 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ev := noopEvent()
			// Warm up first: the guest's heap, and so its memory, grows to
			// its working size over the first calls.
			for range 2000 {
				m.Invoke(tt.ctx, ev, tt.timeout)
			}
			allocs := testing.AllocsPerRun(1000, func() {
				if o := m.Invoke(tt.ctx, ev, tt.timeout); o.Kind != Success {
					t.Fatalf("%v: %s", o.Kind, o.Error())
				}
			})
			if allocs != 0 {
				t.Errorf("a call allocates %v times", allocs)
			}
		})
	}
}
