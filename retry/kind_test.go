package retry

import (
	"strings"
	"testing"
	"time"
)

// TestKindsAreBuiltinsNamedOnce checks the one table of the host's kinds:
// each kind's class is a builtin given by the host or the SDK, KindOf finds
// the kind back from its class, and the names the ledger and the metrics
// show stay what docs/metrics.md and the ledger's records say.
func TestKindsAreBuiltinsNamedOnce(t *testing.T) {
	want := map[Kind][4]string{ // name, class, ledger, metric outcome
		KindTimeout:        {"timeout", ClassTimeout, "timeout", "timeout"},
		KindTrap:           {"trap", ClassTrap, "trap", "trap"},
		KindMemoryExceeded: {"memory-exceeded", ClassMemoryExceeded, "memory", "memory"},
		KindCanceled:       {"canceled", ClassCanceled, "canceled", "canceled"},
		KindPanic:          {"panic", ClassPanic, "panic", "trap"},
	}
	if len(Kinds()) != len(want) {
		t.Fatalf("Kinds() = %v, want %d kinds", Kinds(), len(want))
	}
	for _, k := range Kinds() {
		w := want[k]
		if got := [4]string{k.String(), k.Class(), k.LedgerName(), k.Outcome()}; got != w {
			t.Errorf("kind %d = %q, want %q", int(k), got, w)
		}
		if !IsBuiltin(k.Class()) {
			t.Errorf("%s's class %s is not a builtin", k, k.Class())
		}
		if got := KindOf([]string{"app.Mine", k.Class()}); got != k {
			t.Errorf("KindOf(app.Mine, %s) = %s, want %s", k.Class(), got, k)
		}
	}
	if got := KindOf([]string{"app.Mine", ClassHostError}); got != KindNone {
		t.Errorf("KindOf of no host kind = %s, want none", got)
	}
	if KindNone.Class() != "" || KindNone.Outcome() != "" || Kind(99).String() != "kind(99)" {
		t.Error("KindNone or an unknown kind names something")
	}
}

// TestOverranIsATimeoutUnlessClassed checks what an attempt its deadline
// ended failed with.
func TestOverranIsATimeoutUnlessClassed(t *testing.T) {
	const timeout = 2 * time.Second
	ready := make(chan struct{})
	for _, c := range []struct {
		name    string
		f       *Failure
		classes []string
		msg     string
	}{
		{"returned nil", nil, []string{ClassTimeout}, "attempt ran past its timeout of 2s"},
		{"no class", &Failure{Message: "boom"}, []string{ClassTimeout}, "boom"},
		{"canceled", &Failure{Classes: []string{ClassCanceled}, Message: "ctx done"}, []string{ClassTimeout}, "attempt ran past its timeout of 2s (ctx done)"},
		{"classed", &Failure{Classes: []string{"app.Bad"}, Message: "bad"}, []string{"app.Bad"}, "bad"},
		{"awaits host", &Failure{Classes: []string{ClassCanceled}, Message: "warming", Await: ready}, []string{ClassCanceled}, "warming"},
	} {
		g := Overran(c.f, timeout)
		if g == nil || strings.Join(g.Classes, ",") != strings.Join(c.classes, ",") || g.Message != c.msg {
			t.Errorf("%s: Overran = %+v, want classes %v, message %q", c.name, g, c.classes, c.msg)
		}
	}
}
