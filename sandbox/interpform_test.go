package sandbox

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/wasm/abi"
)

// TestUploadLetsWaitingFormsGo checks that a Load on the interpreter lets
// go the interpreter forms of the idle modules that wait for their
// background compiles (issue 32: six uploads one after another kept six
// forms alive); that such a module compiles its form again for a call;
// and that its background compile, when it comes, moves it onto the
// compiled code from either state.
func TestUploadLetsWaitingFormsGo(t *testing.T) {
	s := openSandbox(t, Config{CacheDir: t.TempDir(), Tiering: TierUp})
	s.compileSlot <- struct{}{} // no background compile runs until the test gives the slot back
	held := true
	defer func() {
		if held {
			s.giveCompileSlot()
		}
	}()
	// The same bytes under three names: one compile serves them all, of
	// the Rust notifier, which compiles in a fraction of a Go guest's time.
	wasm, err := rustNotifier()
	if err != nil {
		t.Fatal(err)
	}
	loadAs := func(name string) *Module {
		m, err := s.Load(context.Background(), name, wasm, ModuleConfig{})
		if err != nil {
			t.Fatalf("load %s: %v", name, err)
		}
		return m
	}
	a := loadAs("a")
	form := a.tier.Load().interp
	if form == nil {
		t.Fatalf("first module on %q without an interpreter form", a.Tier())
	}

	b := loadAs("b")
	if tr := a.tier.Load(); !tr.cold || a.Tier() != TierInterpreter {
		t.Fatalf("first module after the second Load: tier %q, cold %v; want a cold interpreter", tr.name, tr.cold)
	}
	if form.acquire() {
		t.Fatal("the first module's interpreter form is still open after the second Load")
	}
	if st := a.Stats(); st.Live != 0 || st.Idle != 0 || st.ClosedIdle != 1 {
		t.Fatalf("first module after the second Load: %+v, want its idle instance closed", st)
	}

	if o := a.Invoke(context.Background(), shippedNoOwner(), 10*time.Second); o.Kind != Success || o.Tier != TierInterpreter {
		t.Fatalf("call on the cold module: %v on %q (%s), want Success on the interpreter", o.Kind, o.Tier, o.Error())
	}
	if tr := a.tier.Load(); tr.cold || tr.interp == nil {
		t.Fatal("the call did not compile the interpreter's form again")
	}

	c := loadAs("c")
	for _, m := range []*Module{a, b} {
		if !m.tier.Load().cold {
			t.Fatalf("%s kept its interpreter form through the third Load", m.Name())
		}
	}

	held = false
	s.giveCompileSlot()
	for _, m := range []*Module{a, b, c} {
		<-m.tierDone
		if got := m.Tier(); got != TierCompiled {
			t.Fatalf("%s on %q after its background compile, want %q", m.Name(), got, TierCompiled)
		}
	}
	if o := a.Invoke(context.Background(), shippedNoOwner(), 10*time.Second); o.Kind != Success || o.Tier != TierCompiled {
		t.Fatalf("call after the switch: %v on %q (%s)", o.Kind, o.Tier, o.Error())
	}
}

// TestBusyModuleKeepsItsForm checks that a module with a call in flight on
// the interpreter keeps its form through another module's Load, and its
// call's instance goes back to the pool.
func TestBusyModuleKeepsItsForm(t *testing.T) {
	arrived, answer := make(chan struct{}), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		close(arrived)
		<-answer
	}))
	defer srv.Close()
	s := openSandbox(t, Config{CacheDir: t.TempDir(), Tiering: TierUp})
	s.compileSlot <- struct{}{} // no background compile runs
	defer s.giveCompileSlot()
	m := load(t, s, "samples/misbehaving", ModuleConfig{
		AllowedHosts: []string{strings.TrimPrefix(srv.URL, "http://")},
		Config:       map[string]string{"blackhole-url": srv.URL + "/"},
	})
	form := m.tier.Load().interp
	done := make(chan Outcome)
	go func() {
		done <- m.Invoke(context.Background(), &abi.Event{Handler: "hostCallBlocker", InvocationKey: "k"}, time.Minute)
	}()
	<-arrived // the call is in flight, on the interpreter
	load(t, s, "samples/bench", ModuleConfig{})
	if tr := m.tier.Load(); tr.interp != form {
		t.Fatalf("the busy module's tier changed through the Load (cold %v)", tr.cold)
	}
	close(answer)
	if o := <-done; o.Kind != Success {
		t.Fatalf("the call across the Load: %v (%s)", o.Kind, o.Error())
	}
	if st := m.Stats(); st.Live != 1 || st.Idle != 1 {
		t.Fatalf("after the call: %+v, want its instance back in the pool", st)
	}
}
