package sandbox

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/wasm/abi"
)

// onTier loads pkg so that it runs on the named tier for the whole test: on
// the compiled tier through a sandbox that compiles before Load returns; on
// the interpreter through a fresh cache (a miss), its switch held by the
// gate and its background compile cancelled.
func onTier(t testing.TB, name, pkg string, cfg Config, mc ModuleConfig) *Module {
	t.Helper()
	var m *Module
	if name == TierCompiled {
		m = load(t, newSandbox(t, cfg), pkg, mc)
	} else {
		cfg.CacheDir, cfg.Tiering, cfg.tierUpGate = t.TempDir(), TierUp, make(chan struct{})
		m = load(t, openSandbox(t, cfg), pkg, mc)
		m.stopTierUp()
		<-m.tierDone
	}
	if got := m.Tier(); got != name {
		t.Fatalf("module on tier %q, want %q", got, name)
	}
	return m
}

var tiers = []string{TierInterpreter, TierCompiled}

// TestTiersKeepTheSandboxRules runs the same calls on both tiers: ordinary
// calls succeed; a spinning or sleeping guest is stopped at the deadline,
// the sandbox's or the caller's, under the loop guard and under
// close-on-done, as a Timeout; a guest that grows past its memory limit is
// MemoryExceeded.
func TestTiersKeepTheSandboxRules(t *testing.T) {
	const d = 150 * time.Millisecond
	callerDeadline := func() (context.Context, context.CancelFunc) {
		return context.WithTimeoutCause(context.Background(), d, errAttempt)
	}
	background := func() (context.Context, context.CancelFunc) { return context.Background(), func() {} }
	tests := []struct {
		name      string
		pkg       string
		deadlines DeadlineMode
		guard     string
		mc        ModuleConfig
		ev        func() *abi.Event
		ctx       func() (context.Context, context.CancelFunc)
		timeout   time.Duration
		want      OutcomeKind
	}{
		{"no-op handler", "samples/misbehaving", DeadlinesLoopGuard, guardLoop, ModuleConfig{},
			func() *abi.Event { return &abi.Event{Handler: "echo", InvocationKey: "k"} }, background, 10 * time.Second, Success},
		{"bench handler", "samples/bench", DeadlinesLoopGuard, guardLoop, ModuleConfig{},
			orderPlaced, background, 10 * time.Second, Success},
		{"spinner, the sandbox's deadline", "samples/misbehaving", DeadlinesLoopGuard, guardLoop, ModuleConfig{},
			func() *abi.Event { return &abi.Event{Handler: "spinner", InvocationKey: "k"} }, background, d, Timeout},
		{"spinner, the caller's deadline", "samples/misbehaving", DeadlinesLoopGuard, guardLoop, ModuleConfig{},
			func() *abi.Event { return &abi.Event{Handler: "spinner", InvocationKey: "k"} }, callerDeadline, 0, Timeout},
		{"sleeper, the caller's deadline", "samples/misbehaving", DeadlinesLoopGuard, guardLoop, ModuleConfig{},
			func() *abi.Event { return &abi.Event{Handler: "sleeper", InvocationKey: "k"} }, callerDeadline, 0, Timeout},
		{"spinner under close-on-done", "samples/misbehaving", DeadlinesCloseOnDone, guardCloseOnDone, ModuleConfig{},
			func() *abi.Event { return &abi.Event{Handler: "spinner", InvocationKey: "k"} }, callerDeadline, 0, Timeout},
		{"memory hog", "samples/misbehaving", DeadlinesLoopGuard, guardLoop, ModuleConfig{MemoryLimitPages: 512},
			func() *abi.Event { return &abi.Event{Handler: "memoryHog", InvocationKey: "k"} }, background, time.Minute, MemoryExceeded},
	}
	for _, tier := range tiers {
		for _, tt := range tests {
			t.Run(tier+"/"+tt.name, func(t *testing.T) {
				m := onTier(t, tier, tt.pkg, Config{Deadlines: tt.deadlines}, tt.mc)
				if got := m.DeadlineGuard(); got != tt.guard {
					t.Fatalf("deadline guard %q, want %q", got, tt.guard)
				}
				ctx, cancel := tt.ctx()
				defer cancel()
				o := m.Invoke(ctx, tt.ev(), tt.timeout)
				if o.Kind != tt.want {
					t.Fatalf("outcome %v (%s), want %v", o.Kind, o.Error(), tt.want)
				}
				if tt.want == Timeout && !strings.Contains(o.Message, "deadline") {
					t.Errorf("message %q", o.Message)
				}
				if st := m.Stats(); tt.want != Success && st.ClosedFailed != 1 {
					t.Errorf("ClosedFailed %d, want 1: a failed call's instance is closed", st.ClosedFailed)
				}
			})
		}
	}
}

// TestTierUpSwitches checks that a module loaded on a cache miss starts on
// the interpreter, moves to compiled code when its background compile is
// done, closing its idle interpreter instance and with it the interpreter's
// form (whose memory goes back to the OS), and that the next sandbox over
// the same cache starts it compiled.
func TestTierUpSwitches(t *testing.T) {
	dir := t.TempDir()
	m := load(t, openSandbox(t, Config{CacheDir: dir, Tiering: TierUp}), "samples/bench", ModuleConfig{})
	if got := m.Tier(); got != TierInterpreter {
		t.Fatalf("tier %q right after a cache miss, want %q", got, TierInterpreter)
	}
	interp := m.tier.Load().interp
	if o := m.Invoke(context.Background(), orderPlaced(), 10*time.Second); o.Kind != Success {
		t.Fatalf("first call: %v (%s)", o.Kind, o.Error())
	}
	<-m.tierDone
	if got := m.Tier(); got != TierCompiled {
		t.Fatalf("tier %q after the background compile, want %q", got, TierCompiled)
	}
	if st := m.Stats(); st.ClosedTierUp != 1 || st.Idle != 0 || st.Live != 0 {
		t.Fatalf("after the switch: %+v, want the idle interpreter instance closed", st)
	}
	if interp.acquire() {
		t.Fatal("the interpreter's form is still open after the switch")
	}
	checkfor.Nil(t, 10*time.Second, 10*time.Millisecond, func() error {
		if n := m.s.osMem.returns.Load(); n == 0 {
			return errors.New("no memory given back to the OS since the interpreter's form was closed")
		}
		return nil
	})
	if o := m.Invoke(context.Background(), orderPlaced(), 10*time.Second); o.Kind != Success {
		t.Fatalf("call after the switch: %v (%s)", o.Kind, o.Error())
	}
	if st := m.Stats(); st.ClosedTierUp != 1 || st.Created != 2 || st.Live != 1 || st.Idle != 1 {
		t.Fatalf("after a compiled call: %+v, want a compiled instance idle", st)
	}

	again := load(t, openSandbox(t, Config{CacheDir: dir, Tiering: TierUp}), "samples/bench", ModuleConfig{})
	if got := again.Tier(); got != TierCompiled || again.tierDone != nil {
		t.Fatalf("over a filled cache: tier %q (background compile %v), want %q and none", got, again.tierDone != nil, TierCompiled)
	}
}

// TestCallInFlightAcrossTierUp checks that a call running on an interpreter
// instance when the module switches completes, and that its instance is
// closed when it comes back, not reused.
func TestCallInFlightAcrossTierUp(t *testing.T) {
	arrived, answer := make(chan struct{}), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		close(arrived)
		<-answer
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	gate := make(chan struct{})
	s := openSandbox(t, Config{CacheDir: t.TempDir(), Tiering: TierUp, tierUpGate: gate})
	m := load(t, s, "samples/misbehaving", ModuleConfig{
		AllowedHosts: []string{addr},
		Config:       map[string]string{"blackhole-url": srv.URL + "/"},
	})
	done := make(chan Outcome)
	go func() {
		done <- m.Invoke(context.Background(), &abi.Event{Handler: "hostCallBlocker", InvocationKey: "k"}, time.Minute)
	}()
	<-arrived // the call is in flight, on the interpreter
	close(gate)
	<-m.tierDone
	if got := m.Tier(); got != TierCompiled {
		t.Fatalf("tier %q, want %q", got, TierCompiled)
	}
	if st := m.Stats(); st.Live != 1 || st.ClosedTierUp != 0 {
		t.Fatalf("during the call: %+v, want its instance alive", st)
	}
	close(answer)
	if o := <-done; o.Kind != Success {
		t.Fatalf("the call across the switch: %v (%s)", o.Kind, o.Error())
	}
	if st := m.Stats(); st.Live != 0 || st.Idle != 0 || st.ClosedTierUp != 1 {
		t.Fatalf("after the call: %+v, want its interpreter instance closed", st)
	}
}

// TestCloseDuringBackgroundCompile checks that closing the module, or the
// sandbox, while the background compile runs cancels it: the compile's
// goroutine has ended when Close returns, and the module never switches.
func TestCloseDuringBackgroundCompile(t *testing.T) {
	for _, what := range []string{"module", "sandbox"} {
		t.Run(what, func(t *testing.T) {
			s := openSandbox(t, Config{CacheDir: t.TempDir(), Tiering: TierUp})
			m := load(t, s, "samples/bench", ModuleConfig{})
			if what == "module" {
				m.Close(context.Background())
			} else {
				s.Close(context.Background())
			}
			select {
			case <-m.tierDone:
			default:
				t.Fatal("Close returned with the background compile still running")
			}
			if got := m.Tier(); got != TierInterpreter {
				t.Errorf("tier %q after Close, want %q", got, TierInterpreter)
			}
			// The compile of a Go guest takes a second or more, Close came
			// at once: had it run to its end, the cache would hold it.
			if s.comp.cached(m.cacheKey) || s.marks.has(m.cacheKey) {
				t.Error("the background compile ran to its end: it was not cancelled")
			}
			if o := m.Invoke(context.Background(), orderPlaced(), time.Second); o.Kind != Trap || !strings.Contains(o.Message, "closed") {
				t.Errorf("a call after Close: %v (%s), want a trap naming the closed module", o.Kind, o.Error())
			}
		})
	}
}

// TestTimeoutWhileWarmingUp checks what a call's outcome says of its tier:
// a call that runs past its deadline on the interpreter while the module
// compiles is a Timeout marked WarmingUp (Err wraps ErrWarmingUp), whose
// channel is closed when the module runs compiled code; the same guest on
// compiled code, or on an interpreter that is all its module has (the
// compile ended without a switch), is a plain Timeout.
func TestTimeoutWhileWarmingUp(t *testing.T) {
	spin := func() *abi.Event { return &abi.Event{Handler: "spinner", InvocationKey: "k"} }
	gate := make(chan struct{})
	m := load(t, openSandbox(t, Config{CacheDir: t.TempDir(), Tiering: TierUp, tierUpGate: gate}), "samples/misbehaving", ModuleConfig{})

	o := m.Invoke(context.Background(), spin(), 100*time.Millisecond)
	if o.Kind != Timeout || o.Tier != TierInterpreter || o.WarmingUp == nil || !errors.Is(o.Err(), ErrWarmingUp) {
		t.Fatalf("spinner on the interpreter: %v on %q, warming %v, err %v; want a Timeout on the interpreter, warming up",
			o.Kind, o.Tier, o.WarmingUp != nil, o.Err())
	}
	select {
	case <-o.WarmingUp:
		t.Fatal("WarmingUp closed with the switch held")
	default:
	}
	if o := m.Invoke(context.Background(), &abi.Event{Handler: "echo", InvocationKey: "k"}, 10*time.Second); o.Kind != Success || o.Tier != TierInterpreter || o.Err() != nil {
		t.Fatalf("echo on the interpreter: %v on %q (%v)", o.Kind, o.Tier, o.Err())
	}
	close(gate)
	<-o.WarmingUp
	if got := m.Tier(); got != TierCompiled {
		t.Fatalf("tier %q once WarmingUp is closed, want %q", got, TierCompiled)
	}
	// An instance of the compiled code first: made inside the spinner's
	// 100 ms on a loaded machine, the call timed out before it ran.
	if o := m.Invoke(context.Background(), &abi.Event{Handler: "echo", InvocationKey: "k"}, 10*time.Second); o.Kind != Success || o.Tier != TierCompiled {
		t.Fatalf("echo on compiled code: %v on %q (%v)", o.Kind, o.Tier, o.Err())
	}
	c := m.Invoke(context.Background(), spin(), 100*time.Millisecond)
	if c.Kind != Timeout || c.Tier != TierCompiled || c.WarmingUp != nil || errors.Is(c.Err(), ErrWarmingUp) {
		t.Fatalf("spinner compiled: %v on %q, warming %v; want a plain Timeout on compiled code", c.Kind, c.Tier, c.WarmingUp != nil)
	}

	stuck := onTier(t, TierInterpreter, "samples/misbehaving", Config{}, ModuleConfig{})
	if o := stuck.Invoke(context.Background(), spin(), 100*time.Millisecond); o.Kind != Timeout || o.Tier != TierInterpreter || o.WarmingUp != nil {
		t.Fatalf("spinner on an interpreter with no compile to come: %v on %q, warming %v; want a plain Timeout", o.Kind, o.Tier, o.WarmingUp != nil)
	}
}

// TestLoadPreemptsBackgroundCompile: a Load that works in the foreground
// cancels the background compile running, which starts again once the
// foreground is quiet and switches its module as before.
func TestLoadPreemptsBackgroundCompile(t *testing.T) {
	s := openSandbox(t, Config{CacheDir: t.TempDir(), Tiering: TierUp})
	a := load(t, s, "samples/bench", ModuleConfig{})
	checkfor.Nil(t, 10*time.Second, time.Millisecond, func() error {
		s.fg.mu.Lock()
		defer s.fg.mu.Unlock()
		if s.fg.stop == nil {
			return errors.New("the first module's background compile has not started")
		}
		return nil
	})
	b := load(t, s, "samples/misbehaving", ModuleConfig{})
	s.fg.mu.Lock()
	preempted := s.fg.preempted
	s.fg.mu.Unlock()
	if preempted != 1 {
		t.Errorf("%d background compiles cancelled by the second Load, want 1", preempted)
	}
	for _, m := range []*Module{a, b} {
		<-m.tierDone
		if got := m.Tier(); got != TierCompiled {
			t.Errorf("%s on %q after its background compile, want %q", m.Name(), got, TierCompiled)
		}
	}
}
