package sandbox

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/wasm/abi"
)

// replayCapsule reads b as `berth parked replay --capsule` does and, when
// it reads, loads the module under its limits and replays it, bounded by
// maxTime: the outcome, or the error that refused it.
func replayCapsule(s *Sandbox, wasm, b []byte, maxTime time.Duration) (*Replayed, error) {
	c, err := abi.DecodeCapsule(b)
	if err != nil {
		return nil, err
	}
	m, err := s.Load(context.Background(), c.Module.Name, wasm, ModuleConfigOf(c))
	if err != nil {
		return nil, err
	}
	defer m.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), maxTime)
	defer cancel()
	r, err := m.Replay(ctx, c)
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// FuzzReplayCapsule feeds the capsule reader and the replayer any bytes:
// each gives an error or a replay's result, never a panic. Its seeds
// (testdata/fuzz/FuzzReplayCapsule: the memory limits past 4 GiB, the
// impossible answer, the budgets of 0 and 10^12 ms on a guest that spins)
// run as a normal test.
func FuzzReplayCapsule(f *testing.F) {
	s := newSandbox(f, Config{})
	wasm := wasmOf(f, "samples/misbehaving")
	// Compiled once here, so that no input waits for the compiler (a fuzz
	// worker starts with an empty cache): the memory limit is the
	// allocator's, so every limit shares the compiled code.
	load(f, s, "samples/misbehaving", ModuleConfig{}).Close(context.Background())
	f.Fuzz(func(t *testing.T, b []byte) {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("panic on %q: %v", b, p)
			}
		}()
		r, err := replayCapsule(s, wasm, b, 500*time.Millisecond)
		if err == nil && (r.Capsule == nil || r.Outcome.Kind == Success && r.Capsule.Outcome.Kind != "success") {
			t.Fatalf("a replay without its own recording: %+v", r)
		}
	})
}

// TestReplayRefusesWhatNoHostRecorded: the capsules outsiders hand the
// replayer end in an error naming what is wrong, before any guest code
// runs, and a memory limit past 4 GiB is refused by Load itself.
func TestReplayRefusesWhatNoHostRecorded(t *testing.T) {
	s := newSandbox(t, Config{})
	wasm := wasmOf(t, "samples/misbehaving")
	for _, pages := range []uint32{65537, 100000, 4294967295} {
		if _, err := s.Load(context.Background(), "m", wasm, ModuleConfig{MemoryLimitPages: pages}); err == nil || !strings.Contains(err.Error(), "memory limit") {
			t.Errorf("Load at %d pages: %v", pages, err)
		}
	}
	spin := `{"format":"berth-capsule/1","module":{"name":"samples/misbehaving"},"event":{"handler":"spinner","type":"Spin"},"outcome":{"kind":"timeout"}`
	for _, tc := range []struct{ capsule, want string }{
		{strings.Replace(spin, `"outcome"`, `"limits":{"memory_limit_pages":100000},"outcome"`, 1), "limits.memory_limit_pages: 100000"},
		{strings.Replace(spin, `"outcome"`, `"limits":{"max_response_bytes":4},"calls":[{"fn":"http","http":{"method":"GET","url":"http://s/","response":{"status":200,"body":"too long"}},"reply":{"code":"ok"}}],"outcome"`, 1),
			"calls[0] (http GET http://s/): http.response.body: 8 bytes, more than the host delivered"},
	} {
		if _, err := replayCapsule(s, wasm, []byte(tc.capsule+"}"), time.Second); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("err = %v, want it to mention %q", err, tc.want)
		}
	}
	// A capsule built in code, not read from a file, is validated too.
	m := load(t, s, "samples/misbehaving", ModuleConfig{})
	if _, err := m.Replay(context.Background(), &abi.Capsule{Format: abi.CapsuleFormat}); err == nil || !strings.Contains(err.Error(), "module.name") {
		t.Errorf("Replay of an empty capsule: %v", err)
	}
}

// TestReplayEndsByItsContextWhateverTheBudget: a spinning guest whose
// capsule names no budget (0) or 10^12 ms is stopped when the replay's
// context ends.
func TestReplayEndsByItsContextWhateverTheBudget(t *testing.T) {
	s := newSandbox(t, Config{})
	wasm := wasmOf(t, "samples/misbehaving")
	for _, ms := range []string{"0", "1000000000000"} {
		b := `{"format":"berth-capsule/1","module":{"name":"samples/misbehaving"},"limits":{"timeout_ms":` + ms + `},"event":{"handler":"spinner","type":"Spin"},"outcome":{"kind":"timeout"}}`
		start := time.Now()
		r, err := replayCapsule(s, wasm, []byte(b), 300*time.Millisecond)
		if err != nil {
			t.Fatalf("timeout_ms %s: %v", ms, err)
		}
		if r.Outcome.Kind != Timeout || time.Since(start) > 20*time.Second {
			t.Errorf("timeout_ms %s: %v after %s, want a timeout at the context's end", ms, r.Outcome.Kind, time.Since(start))
		}
	}
}
