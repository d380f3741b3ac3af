package sandbox

import (
	"context"
	"testing"
	"time"
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
	a := load(t, s, "samples/bench", ModuleConfig{})
	form := a.tier.Load().interp
	if form == nil {
		t.Fatalf("first module on %q without an interpreter form", a.Tier())
	}

	b := load(t, s, "samples/misbehaving", ModuleConfig{})
	if tr := a.tier.Load(); !tr.cold || a.Tier() != TierInterpreter {
		t.Fatalf("first module after the second Load: tier %q, cold %v; want a cold interpreter", tr.name, tr.cold)
	}
	if form.acquire() {
		t.Fatal("the first module's interpreter form is still open after the second Load")
	}
	if st := a.Stats(); st.Live != 0 || st.Idle != 0 || st.ClosedIdle != 1 {
		t.Fatalf("first module after the second Load: %+v, want its idle instance closed", st)
	}

	if o := a.Invoke(context.Background(), orderPlaced(), 10*time.Second); o.Kind != Success || o.Tier != TierInterpreter {
		t.Fatalf("call on the cold module: %v on %q (%s), want Success on the interpreter", o.Kind, o.Tier, o.Error())
	}
	if tr := a.tier.Load(); tr.cold || tr.interp == nil {
		t.Fatal("the call did not compile the interpreter's form again")
	}

	c, err := s.Load(context.Background(), "c", wasmOf(t, "samples/misbehaving"), ModuleConfig{})
	if err != nil {
		t.Fatal(err)
	}
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
	if o := a.Invoke(context.Background(), orderPlaced(), 10*time.Second); o.Kind != Success || o.Tier != TierCompiled {
		t.Fatalf("call after the switch: %v on %q (%s)", o.Kind, o.Tier, o.Error())
	}
}
