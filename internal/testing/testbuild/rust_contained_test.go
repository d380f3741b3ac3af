package testbuild_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/guest-sdk/berth"
	"github.com/berthhq/berth/guest-sdk/berthtest"
	"github.com/berthhq/berth/hostspec"
	"github.com/berthhq/berth/internal/testing/testbuild"
	"github.com/berthhq/berth/sandbox"
)

func misbehavingSpec(t *testing.T, opts ...hostspec.Option) *berthtest.Spec {
	t.Helper()
	return rustSpec(t, "samples/misbehaving-rs", opts...)
}

// TestRustGuestIsContained: a Rust guest that spins, sleeps, allocates
// without end, panics or hands the host a length past its memory costs its
// instance, never the host, and fails the attempt with the host's class
// for it, as a Go guest's does (hostspec's TestHostOutcomesAreFailures).
func TestRustGuestIsContained(t *testing.T) {
	tests := []struct {
		event   string
		opts    []hostspec.Option
		class   *berth.ErrorClass
		message string
	}{
		{"Spin", []hostspec.Option{hostspec.WithTimeout(200 * time.Millisecond)}, hostspec.Timeout, ""},
		{"Sleep", []hostspec.Option{hostspec.WithTimeout(200 * time.Millisecond)}, hostspec.Timeout, ""},
		{"Hog", []hostspec.Option{hostspec.WithMemoryLimitPages(256)}, hostspec.MemoryExceeded, "memory limit of 256 pages"},
		// One 64 MiB block at a 16 MiB limit: std prints "memory allocation
		// of 67108864 bytes failed" and aborts (unreachable); the host saw
		// the memory.grow it refused, and knows why.
		{"BigAlloc", []hostspec.Option{hostspec.WithMemoryLimitPages(256)}, hostspec.MemoryExceeded, "memory limit of 256 pages (16 MiB): the host refused to grow its memory to"},
		// Rust 1.63's wasm32 cannot unwind: a panic aborts, which traps, and
		// the host reports the panic's text from stderr.
		{"Panic", nil, hostspec.Trap, "the handler panicked on purpose"},
		{"Lie", nil, hostspec.Trap, "outside its memory"},
	}
	for _, tt := range tests {
		t.Run(tt.event, func(t *testing.T) {
			spec := misbehavingSpec(t, tt.opts...)
			then := spec.WhenEvent(berthtest.Event{Type: tt.event, AggregateID: "a-1"}).ExpectErrorClass(tt.class)
			if !strings.Contains(then.Result.Failure.Message, tt.message) {
				t.Errorf("failure %q does not say %q", then.Result.Failure.Message, tt.message)
			}
			// The host lives on, and so does the module: the next call gets a fresh instance.
			spec.WhenEvent(berthtest.Event{Type: "Echo", AggregateID: "a-2"}).ExpectNoError()
		})
	}
}

// TestRustGuestABIDetails pins, with a guest that is not Go, what ABI.md
// says of the host functions: a request/reply call from _initialize
// answers -2; take_reply with a short buffer copies what fits, and the
// reply is gone; log lines and stdout reach the host's log.
func TestRustGuestABIDetails(t *testing.T) {
	spec := misbehavingSpec(t)
	spec.WhenEvent(berthtest.Event{Type: "InitProbe", AggregateID: "a-1"}).ExpectNoError()

	spec.Config["probe"] = "a value of some length"
	spec.WhenEvent(berthtest.Event{Type: "ShortTakeReply", AggregateID: "a-1"}).ExpectNoError()

	then := spec.WhenEvent(berthtest.Event{Type: "Echo", AggregateID: "a-1"}).ExpectNoError()
	lines := spec.Log.Lines()
	if len(lines) != 1 || lines[0].Key != then.Key || lines[0].Msg != "echo key="+then.Key || lines[0].Level != "info" {
		t.Errorf("log lines %+v", lines)
	}
}

// TestRustModulesGetTheLoopGuard: a module of the Rust SDK imports
// sched_yield (its _initialize yields once), so the host stops a spinning
// guest with its loop guard, at no cost to a call, not with wazero's
// close-on-context-done, which costs microseconds a call.
func TestRustModulesGetTheLoopGuard(t *testing.T) {
	sb, err := sandbox.New(sandbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(context.Background())
	for _, crate := range []string{"samples/shipment-notifier-rs", "samples/order-summary-rs", "samples/order-saga-rs"} {
		wasm, err := testbuild.RustBytes(crate)
		if err != nil {
			t.Fatal(err)
		}
		mod, err := sb.Load(context.Background(), crate, wasm, sandbox.ModuleConfig{})
		if err != nil {
			t.Fatalf("%s: %v", crate, err)
		}
		if g := mod.DeadlineGuard(); g != "loop-guard" {
			t.Errorf("%s runs under the %s deadline guard, want loop-guard", crate, g)
		}
	}
}
