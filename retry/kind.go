package retry

import (
	"fmt"
	"time"
)

// Kind is one of the host's own failure kinds: how the host saw an attempt
// end, apart from what the guest reported. It is the one vocabulary of
// them: the sandbox names its outcomes with it, the registry gives each
// its builtin class, and the engine and the metrics name a failure's kind
// from its class with it ([KindOf]).
type Kind int

// The host's failure kinds. KindNone is a failure that has none (the
// guest's own, classified by its classes).
const (
	KindNone Kind = iota
	KindTimeout
	KindTrap
	KindMemoryExceeded
	KindCanceled
	KindPanic
)

// kinds is the table of the kinds, in Kind order: each one's name as logs
// and capsules show it, its builtin class, its name in the ledger
// (ErrorInfo.Kind) and its outcome in the attempts metric.
var kinds = [...]struct{ name, class, ledger, metric string }{
	KindNone:           {"", "", "", ""},
	KindTimeout:        {"timeout", ClassTimeout, "timeout", "timeout"},
	KindTrap:           {"trap", ClassTrap, "trap", "trap"},
	KindMemoryExceeded: {"memory-exceeded", ClassMemoryExceeded, "memory", "memory"},
	KindCanceled:       {"canceled", ClassCanceled, "canceled", "canceled"},
	// The metric's outcomes are few: a handler's panic counts as its trap.
	KindPanic: {"panic", ClassPanic, "panic", "trap"},
}

// Kinds returns every kind but KindNone, in a fresh slice.
func Kinds() []Kind {
	return []Kind{KindTimeout, KindTrap, KindMemoryExceeded, KindCanceled, KindPanic}
}

func (k Kind) valid() bool { return k > KindNone && int(k) < len(kinds) }

// String is the kind as logs and capsules show it ("memory-exceeded").
func (k Kind) String() string {
	if k == KindNone {
		return "none"
	}
	if !k.valid() {
		return fmt.Sprintf("kind(%d)", int(k))
	}
	return kinds[k].name
}

// Class is the builtin class a failure of the kind is given; "" for
// KindNone.
func (k Kind) Class() string {
	if !k.valid() {
		return ""
	}
	return kinds[k].class
}

// LedgerName is the kind as a parked record's error keeps it
// (ledger.ErrorInfo.Kind: "memory"); "" for KindNone.
func (k Kind) LedgerName() string {
	if !k.valid() {
		return ""
	}
	return kinds[k].ledger
}

// Outcome is the kind as the attempts metric's outcome label says it
// (a panic is a "trap"); "" for KindNone.
func (k Kind) Outcome() string {
	if !k.valid() {
		return ""
	}
	return kinds[k].metric
}

// KindOf is the kind of the first class in classes that has one; KindNone
// when none does.
func KindOf(classes []string) Kind {
	for _, c := range classes {
		for _, k := range Kinds() {
			if kinds[k].class == c {
				return k
			}
		}
	}
	return KindNone
}

// Overran is the failure of an attempt whose deadline, timeout after it
// began, passed while the invoker returned f: a failure of class
// [ClassTimeout] when f is nil (a handler that cannot be interrupted has
// still overrun its budget), has no class, or is [ClassCanceled] (the
// invoker saw its context end, and it was the deadline, not a
// cancellation). A failure with classes of its own keeps them, and so
// does one the host cut short for a condition of its own ([AwaitsHost]).
func Overran(f *Failure, timeout time.Duration) *Failure {
	if AwaitsHost(f) != nil {
		return f
	}
	msg := fmt.Sprintf("attempt ran past its timeout of %s", timeout)
	switch {
	case f == nil:
		return &Failure{Classes: []string{ClassTimeout}, Message: msg}
	case len(f.Classes) == 0:
		g := *f
		g.Classes = []string{ClassTimeout}
		return &g
	case IsCanceled(f):
		g := *f
		g.Classes = []string{ClassTimeout}
		g.Message = msg + " (" + f.Message + ")"
		return &g
	}
	return f
}
