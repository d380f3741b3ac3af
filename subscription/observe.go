package subscription

import (
	"slices"
	"strings"
	"time"

	"github.com/berthhq/berth/retry"
)

// Observer is told what the engine does, as it does it, so that metrics can
// count it (api's Prometheus side is one): the engine keeps no counters of
// its own. Its methods are called on the engine's goroutines, under no lock
// of the engine's, and must return at once. Options.Observer nil: none.
type Observer interface {
	// Started is called when a subscription's run starts, with the label
	// sets its attempts are counted under (every outcome, in each phase),
	// so that a metric can start each of them at 0: a counter whose series
	// first appears at 1 hides that first increment from rate().
	Started(subscription string, known []Attempt)
	// Attempted is called at the end of every counted attempt: of live or
	// replayed delivery, and of a long-horizon retry of a parked aggregate
	// (Attempt.LongHorizon). An attempt cut short by shutdown, or by the
	// host for a condition of its own, is not counted.
	Attempted(Attempt)
	// Parked is called when an aggregate of the subscription was parked.
	Parked(subscription string)
	// Retried is called at the end of a long-horizon retry of a parked
	// aggregate; handled says whether it succeeded (and resumed it). Its
	// handler call, when it made one, is told to Attempted as well.
	Retried(subscription string, handled bool)
	// Resolved is called when a parked aggregate is resumed or skipped.
	Resolved(Resolution)
}

// Attempt is one attempt at an event, as an Observer is told of it.
type Attempt struct {
	// Subscription is the subscription whose handler was called.
	Subscription string
	// Outcome is "success" or the failure's kind: "timeout", "trap",
	// "memory", "canceled" for the host's own kinds (a panic of the invoker
	// is a "trap"), else the class it was taken for: "recoverable",
	// "unrecoverable", "systemic" or "backpressure".
	Outcome string
	// Class is the failure's nearest class that the module declares or that
	// is builtin; "other" when it has classes but none of those (names
	// are the guest's, unbounded), "none" when it has none or succeeded.
	Class string
	// Duration is how long the handler's call took.
	Duration time.Duration
	// Appended is when the event's commit was appended; Ended when the
	// attempt ended: for a success, the delay from append to handled.
	Appended, Ended time.Time
	// LongHorizon says the attempt was a long-horizon retry of a parked
	// aggregate, not one of delivery (its retry budget, an outage's probes
	// and replays after a resume included).
	LongHorizon bool
}

// hostOutcomes are the Outcomes of an Attempt that are not a class the
// failure was taken for: a success, and each of the host's kinds (retry's
// table) with the builtin class it has.
func hostOutcomes() []struct{ outcome, class string } {
	outs := []struct{ outcome, class string }{{"success", "none"}}
	seen := map[string]bool{}
	for _, k := range retry.Kinds() {
		if o := k.Outcome(); !seen[o] {
			seen[o] = true
			outs = append(outs, struct{ outcome, class string }{o, k.Class()})
		}
	}
	return outs
}

// knownAttempts are the label sets of a subscription's attempts that
// Started names: each outcome, with the class it has when the failure
// gives none of its own ("none" for a guest's failure, the builtin class
// of the host's kinds), in both phases.
func knownAttempts(sub string) []Attempt {
	var known []Attempt
	for _, lh := range []bool{false, true} {
		for _, o := range hostOutcomes() {
			known = append(known, Attempt{Subscription: sub, Outcome: o.outcome, Class: o.class, LongHorizon: lh})
		}
		for _, c := range []retry.Class{retry.Recoverable, retry.Unrecoverable, retry.Systemic, retry.Backpressure} {
			known = append(known, Attempt{Subscription: sub, Outcome: c.String(), Class: "none", LongHorizon: lh})
		}
	}
	return known
}

// Resolution is a parked aggregate resumed or skipped, as an Observer is
// told of it.
type Resolution struct {
	// Subscription is the subscription the aggregate was parked in.
	Subscription string
	// Action is "resume" or "skip".
	Action string
	// By is "operator", "job" (an operator's bulk job) or "berth" (a
	// long-horizon retry that succeeded, or a park an outage's failures
	// made, taken back).
	By string
	// Parked is the time from the record's first failure to now.
	Parked time.Duration
}

// observer calls an Observer, or nothing when there is none, so that each
// place the engine tells it of something is one line.
type observer struct{ o Observer }

func (ob observer) started(sub string) {
	if ob.o != nil {
		ob.o.Started(sub, knownAttempts(sub))
	}
}

// attempt tells of an attempt at c that ended at end, begun at start, with
// failure f (nil: success) classified as d under policy pol; longHorizon
// when it was a long-horizon retry.
func (ob observer) attempt(sub string, f *retry.Failure, d retry.Decision, pol *retry.Policy, appended, start, end time.Time, longHorizon bool) {
	if ob.o == nil {
		return
	}
	a := Attempt{Subscription: sub, Outcome: "success", Class: "none", Duration: end.Sub(start), Appended: appended, Ended: end, LongHorizon: longHorizon}
	if f != nil {
		a.Outcome, a.Class = outcomeKind(f, d), boundedClass(classifiedChain(f, d), pol)
	}
	ob.o.Attempted(a)
}

func (ob observer) parked(sub string) {
	if ob.o != nil {
		ob.o.Parked(sub)
	}
}

func (ob observer) retried(sub string, f *retry.Failure) {
	if ob.o != nil {
		ob.o.Retried(sub, f == nil)
	}
}

// resolved tells of a resume or skip by actor of a record that first
// failed at first.
func (ob observer) resolved(sub, action, actor string, first, now time.Time) {
	if ob.o == nil {
		return
	}
	by := actorKind(actor)
	if by == byLongHorizon || by == byOutage {
		by = "berth" // the metric's label: the host's own resumes together
	}
	ob.o.Resolved(Resolution{Subscription: sub, Action: action, By: by, Parked: now.Sub(first)})
}

// What kind of actor resumed or skipped an aggregate, as a notification's
// By says it.
const (
	byOperator    = "operator"
	byJob         = "job"
	byLongHorizon = "long-horizon-retry"
	byOutage      = "outage"
)

// actorKind is the kind of actor (a by* constant) of a resume or skip.
func actorKind(actor string) string {
	switch {
	case actor == actorBerth:
		return byLongHorizon
	case actor == actorOutage:
		return byOutage
	case strings.HasPrefix(actor, "job "): // jobs/run.go's actor
		return byJob
	}
	return byOperator
}

// outcomeKind is an Attempt's Outcome for failure f classified as d: its
// host kind's outcome (retry's table), else the class it was taken for.
func outcomeKind(f *retry.Failure, d retry.Decision) string {
	if k := retry.KindOf(f.Classes); k != retry.KindNone {
		return k.Outcome()
	}
	return d.Class.String()
}

// boundedClass is an Attempt's Class for a failure of chain under pol: a
// name the module declares, a builtin, or one the handler's lists name
// (the configuration's, so bounded too).
func boundedClass(chain []string, pol *retry.Policy) string {
	if len(chain) == 0 {
		return "none"
	}
	for _, c := range chain {
		if retry.IsBuiltin(c) || pol.Classes.Declared(c) || slices.Contains(pol.Unrecoverable, c) || slices.Contains(pol.Recoverable, c) {
			return c
		}
	}
	return "other"
}
