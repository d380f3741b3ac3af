package registry

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/retry"
	"github.com/berthhq/berth/sandbox"
	"github.com/berthhq/berth/wasm/abi"
)

// failureOf gives host-side outcomes their builtin classes, and bounds a guest's retryAfterMillis by
// retry.MaxRetryAfter without overflowing.
func TestFailureOf(t *testing.T) {
	backpressure := func(ms uint64) sandbox.Outcome {
		return sandbox.Outcome{Kind: sandbox.GuestFailure, Failure: abi.Failure{Kind: abi.KindBackpressure, Classes: []string{"Busy"}, RetryAfterMillis: ms}}
	}
	tests := []struct {
		name      string
		o         sandbox.Outcome
		classes   []string
		reported  retry.ReportedKind
		wantAfter time.Duration
	}{
		{"timeout", sandbox.Outcome{Kind: sandbox.Timeout}, []string{retry.ClassTimeout}, retry.ReportedUnspecified, 0},
		{"memory", sandbox.Outcome{Kind: sandbox.MemoryExceeded}, []string{retry.ClassMemoryExceeded}, retry.ReportedUnspecified, 0},
		{"canceled", sandbox.Outcome{Kind: sandbox.Canceled}, []string{retry.ClassCanceled}, retry.ReportedUnspecified, 0},
		{"trap", sandbox.Outcome{Kind: sandbox.Trap}, []string{retry.ClassTrap}, retry.ReportedUnspecified, 0},
		{"refused without a class", sandbox.Outcome{Kind: sandbox.GuestFailure, Observed: sandbox.Observed{ConnRefused: true}},
			[]string{retry.ClassConnectionRefused}, retry.ReportedUnspecified, 0},
		{"backpressure", backpressure(1500), []string{"Busy"}, retry.ReportedBackpressure, 1500 * time.Millisecond},
		{"backpressure at the cap", backpressure(uint64(retry.MaxRetryAfter / time.Millisecond)), []string{"Busy"}, retry.ReportedBackpressure, retry.MaxRetryAfter},
		{"backpressure beyond a Duration", backpressure(math.MaxUint64), []string{"Busy"}, retry.ReportedBackpressure, retry.MaxRetryAfter},
		{"observed Retry-After wins when larger", func() sandbox.Outcome {
			o := backpressure(1000)
			o.Observed = sandbox.Observed{HTTP429: true, RetryAfter: 5 * time.Second}
			return o
		}(), []string{"Busy"}, retry.ReportedBackpressure, 5 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := failureOf(&tt.o)
			if f == nil || !slices.Equal(f.Classes, tt.classes) || f.Reported != tt.reported || f.RetryAfter != tt.wantAfter {
				t.Errorf("failureOf = %+v, want classes %v reported %d retry after %v", f, tt.classes, tt.reported, tt.wantAfter)
			}
		})
	}
	if f := failureOf(&sandbox.Outcome{Kind: sandbox.Success}); f != nil {
		t.Errorf("success: %+v", f)
	}
	// A timeout on the interpreter while the module compiles is the host's: berth.Canceled, not
	// counted, awaiting the compiled tier (the engine's side is subscription's TestWarmingUpTimeoutIsNotCounted).
	ready := make(chan struct{})
	f := failureOf(&sandbox.Outcome{Kind: sandbox.Timeout, Tier: sandbox.TierInterpreter, WarmingUp: ready, Message: "the call ran past its 1s deadline"})
	if !slices.Equal(f.Classes, []string{retry.ClassCanceled}) || retry.AwaitsHost(f) != (<-chan struct{})(ready) ||
		!strings.Contains(f.Message, sandbox.ErrWarmingUp.Error()) {
		t.Errorf("timeout while warming up: %+v, want berth.Canceled awaiting the compiled tier", f)
	}
}
