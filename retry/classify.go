package retry

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Class is what a failure is taken for, which decides what happens next.
type Class int

const (
	// Recoverable failures are retried within the handler's budget, then the aggregate is parked. A
	// failure nothing classifies is recoverable.
	Recoverable Class = iota
	// Unrecoverable failures park the aggregate at once, without a retry.
	Unrecoverable
	// Systemic failures (an outage) pause the whole partition, which retries until it is back; no
	// aggregate spends its budget or is parked.
	Systemic
	// Backpressure failures are retried with backoff and jitter, honouring RetryAfter as a floor, while
	// the partition's concurrency is lowered; the aggregate is parked only when
	// [Policy.BackpressureAttempts] is spent.
	Backpressure
)

// String returns the class's name as written in TOML: "recoverable", "unrecoverable", "systemic" or
// "backpressure" ("Class(n)" for an unknown value).
func (c Class) String() string {
	switch c {
	case Recoverable:
		return "recoverable"
	case Unrecoverable:
		return "unrecoverable"
	case Systemic:
		return "systemic"
	case Backpressure:
		return "backpressure"
	}
	return fmt.Sprintf("Class(%d)", int(c))
}

// ParseClass reads a class name as [Class.String] writes it, ignoring case and surrounding space. The
// error quotes the value and lists the valid names.
func ParseClass(s string) (Class, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "recoverable":
		return Recoverable, nil
	case "unrecoverable":
		return Unrecoverable, nil
	case "systemic":
		return Systemic, nil
	case "backpressure":
		return Backpressure, nil
	}
	return 0, fmt.Errorf("retry: unknown failure class %q (want recoverable, unrecoverable, systemic or backpressure)", s)
}

// MarshalText implements encoding.TextMarshaler with [Class.String].
func (c Class) MarshalText() ([]byte, error) {
	if c < Recoverable || c > Backpressure {
		return nil, fmt.Errorf("retry: unknown failure class %d", int(c))
	}
	return []byte(c.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler with [ParseClass].
func (c *Class) UnmarshalText(text []byte) error {
	v, err := ParseClass(string(text))
	if err != nil {
		return err
	}
	*c = v
	return nil
}

// ReportedKind is what the guest itself said about its failure.
type ReportedKind int

const (
	// ReportedUnspecified: the guest said nothing beyond the error (the default).
	ReportedUnspecified ReportedKind = iota
	// ReportedSystemic: the guest says something it depends on is down.
	ReportedSystemic
	// ReportedBackpressure: the guest says it was refused as busy (and may give a RetryAfter).
	ReportedBackpressure
)

// Failure is one failed attempt of a handler, as the host saw it. Host-side failures use the builtin class
// names ([Builtins]).
type Failure struct {
	// Classes is the error's class chain, nearest first (e.g. ["UnknownBuyer", "Notification"]);
	// host-side failures use the builtin names (ClassTimeout, ...).
	Classes []string
	// Message is the error's message.
	Message string
	// Code is the error's code, if the guest gave one.
	Code string
	// Reported is what the guest said about the failure.
	Reported ReportedKind
	// RetryAfter is the floor for the next attempt asked for by the guest or seen in a 429's Retry-After.
	RetryAfter time.Duration
	// HTTP429 is set when the attempt saw an outbound 429 Too Many Requests.
	HTTP429 bool
	// Module names the module version that ran the attempt ("shipment-notifier v3"); empty for a
	// failure no module's code produced. It is kept with the failure, not classified by.
	Module string
	// Await, on a failure of ClassCanceled, says the host cut the attempt short for a condition of its
	// own that ends when Await is closed: a module whose compiled code is still being made, on whose
	// interpreter the attempt ran past its deadline (sandbox.ErrWarmingUp). Such an attempt is not the
	// handler's, even though its deadline passed: it is not counted, and the event is delivered again
	// once Await is closed (never sooner, so nothing spins on the condition).
	Await <-chan struct{}
	// Capsule is the recording of the attempt (an abi.Capsule, encoded) when the invoker made one:
	// the engine keeps it in the ledger beside the record when the attempt parks the aggregate, or is
	// the last failed attempt of a long-horizon retry. It is kept, never classified by.
	Capsule []byte
}

// Error returns "<nearest class>: <message> [<code>]", leaving out what is empty.
func (f *Failure) Error() string {
	if f == nil {
		return "<nil failure>"
	}
	var b strings.Builder
	if len(f.Classes) > 0 {
		b.WriteString(f.Classes[0])
	}
	if f.Message != "" {
		if b.Len() > 0 {
			b.WriteString(": ")
		}
		b.WriteString(f.Message)
	}
	if f.Code != "" {
		if b.Len() > 0 {
			b.WriteString(" ")
		}
		b.WriteString("[" + f.Code + "]")
	}
	if b.Len() == 0 {
		return "handler failed"
	}
	return b.String()
}

// Rule is one application-wide classifier rule from TOML:
//
//	[[classifier.rules]]
//	class = "berth.Timeout"
//	as = "unrecoverable"
type Rule struct {
	Class string `toml:"class"` // the error class name the rule is for
	As    string `toml:"as"`    // the class it is taken for: recoverable, unrecoverable, systemic, backpressure
}

// Classifier holds the application's classifier rules, which apply to every handler. It is immutable and
// safe for concurrent use. A nil *Classifier has no rules.
type Classifier struct {
	rules map[string]classifierRule
}

type classifierRule struct {
	index int // 1-based, in the order of the TOML file
	class Class
}

// NewClassifier checks and indexes the rules. Rules are numbered from 1 (rule 1 is the first
// [[classifier.rules]]), in errors and in [Decision.Reason]. An error names the rule and the bad value: an
// empty or padded class, an unknown "as", a class given by two rules, a name under [ReservedPrefix] that
// is not one of the [Builtins] (a typo such as "berth.Timout" would otherwise never match).
func NewClassifier(rules []Rule) (*Classifier, error) {
	c := &Classifier{rules: make(map[string]classifierRule, len(rules))}
	var errs []error
	for i, r := range rules {
		n := i + 1
		as, err := ParseClass(r.As)
		switch {
		case r.Class == "":
			errs = append(errs, fmt.Errorf("retry: classifier rule %d: class = %q: empty class name", n, r.Class))
			continue
		case strings.TrimSpace(r.Class) != r.Class:
			errs = append(errs, fmt.Errorf("retry: classifier rule %d: class = %q: leading or trailing space", n, r.Class))
			continue
		case err != nil:
			errs = append(errs, fmt.Errorf("retry: classifier rule %d (class %q): as = %q: want recoverable, unrecoverable, systemic or backpressure", n, r.Class, r.As))
			continue
		}
		if strings.HasPrefix(r.Class, ReservedPrefix) && !IsBuiltin(r.Class) {
			errs = append(errs, fmt.Errorf("retry: classifier rule %d: class = %q: no builtin class has that name (names starting %q are the host's own; see wasm/abi/ABI.md)", n, r.Class, ReservedPrefix))
			continue
		}
		if prev, ok := c.rules[r.Class]; ok {
			errs = append(errs, fmt.Errorf("retry: classifier rule %d: class = %q: already classified by rule %d", n, r.Class, prev.index))
			continue
		}
		c.rules[r.Class] = classifierRule{index: n, class: as}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return c, nil
}

// Origin says which step of [Classify] decided.
type Origin int

const (
	// OriginDefault: nothing classified the failure; it is recoverable.
	OriginDefault Origin = iota
	// OriginHandler: the handler's own Recoverable or Unrecoverable list.
	OriginHandler
	// OriginGuest: what the guest reported (systemic or backpressure).
	OriginGuest
	// OriginClassifier: an application classifier rule.
	OriginClassifier
	// OriginBuiltin: the host's builtin defaults (connection refused, 429, timeout, trap, ...).
	OriginBuiltin
)

// String returns "default", "handler", "guest", "classifier" or "builtin".
func (o Origin) String() string {
	switch o {
	case OriginDefault:
		return "default"
	case OriginHandler:
		return "handler"
	case OriginGuest:
		return "guest"
	case OriginClassifier:
		return "classifier"
	case OriginBuiltin:
		return "builtin"
	}
	return fmt.Sprintf("Origin(%d)", int(o))
}

// Decision is the outcome of [Classify].
type Decision struct {
	// Class is what the failure is taken for.
	Class Class
	// RetryAfter is the floor for the next attempt; set only for Backpressure (the Failure's RetryAfter, at
	// most [MaxRetryAfter]).
	RetryAfter time.Duration
	// Reason says what decided, for logs and the failure ledger, e.g. "handler unrecoverable: UnknownBuyer",
	// "classifier rule 2: berth.Timeout", "guest reported systemic", "builtin: berth.ConnectionRefused",
	// "outbound HTTP 429", "default".
	Reason string
	// By is the step that decided.
	By Origin
	// Chain is the class chain the failure was classified by, nearest first: the chain as sent, with the
	// ancestors of its nearest declared class taken from the module's tree (see [ClassTree.Resolve]).
	Chain []string
	// Undeclared lists the names in Chain the module does not declare (reserved berth.* names left out);
	// empty when the policy knows no tree.
	Undeclared []string
}

// CountsTowardOutage reports whether the failure should be fed to the partition's [Detector]: only
// recoverable failures that nobody classified on purpose. A class the handler or the application
// explicitly calls recoverable is "retried within the budget even where the subscription would take it
// for an outage"; unrecoverable, systemic and backpressure failures have their own handling.
func (d Decision) CountsTowardOutage() bool {
	return d.Class == Recoverable && (d.By == OriginDefault || d.By == OriginBuiltin)
}

// Classify decides what a failure is taken for, in the order docs/failure-model.md gives (section 2,
// "Classify before counting").
// The failure's class chain is first read by the module's declared tree (p.Classes, see
// [ClassTree.Resolve]): a declared class's ancestors are the tree's, whatever chain was sent; every step
// below walks that chain, which the Decision carries as Chain.
//
//  1. The handler's own lists (p.Unrecoverable, p.Recoverable): the chain is walked nearest class first
//     and the first class found in either list decides, so when a class and one of its ancestors are in
//     different lists, the nearer one wins. The very same class in both lists is unrecoverable: parking
//     at once is the safer reading of a contradictory configuration.
//  2. What the guest reported: systemic, or backpressure.
//  3. The application's classifier rules, nearest class first.
//  4. Builtin defaults: ClassConnectionRefused anywhere in the chain is systemic; else an outbound 429
//     is backpressure; else ClassTimeout, ClassTrap, ClassMemoryExceeded and ClassPanic are recoverable.
//  5. Anything else is recoverable.
//
// A Backpressure decision carries f.RetryAfter, bounded by [CapRetryAfter] (negative taken as 0, at most
// [MaxRetryAfter]). p and app may be nil (no lists, no
// rules); a nil f is recoverable.
func Classify(f *Failure, p *Policy, app *Classifier) Decision {
	if f == nil {
		return Decision{Class: Recoverable, Reason: "default", By: OriginDefault}
	}
	var tree *ClassTree
	if p != nil {
		tree = p.Classes
	}
	chain, undeclared := tree.Resolve(f.Classes)
	d := classify(f, chain, p, app)
	d.Chain, d.Undeclared = chain, undeclared
	return d
}

// classify is Classify's steps over the resolved chain.
func classify(f *Failure, chain []string, p *Policy, app *Classifier) Decision {
	backpressure := func(reason string, by Origin) Decision {
		return Decision{Class: Backpressure, RetryAfter: CapRetryAfter(f.RetryAfter), Reason: reason, By: by}
	}
	if p != nil && (len(p.Unrecoverable) > 0 || len(p.Recoverable) > 0) {
		for _, c := range chain {
			if slices.Contains(p.Unrecoverable, c) {
				return Decision{Class: Unrecoverable, Reason: "handler unrecoverable: " + c, By: OriginHandler}
			}
			if slices.Contains(p.Recoverable, c) {
				return Decision{Class: Recoverable, Reason: "handler recoverable: " + c, By: OriginHandler}
			}
		}
	}
	switch f.Reported {
	case ReportedSystemic:
		return Decision{Class: Systemic, Reason: "guest reported systemic", By: OriginGuest}
	case ReportedBackpressure:
		return backpressure("guest reported backpressure", OriginGuest)
	}
	if app != nil {
		for _, c := range chain {
			if r, ok := app.rules[c]; ok {
				reason := fmt.Sprintf("classifier rule %d: %s", r.index, c)
				if r.class == Backpressure {
					return backpressure(reason, OriginClassifier)
				}
				return Decision{Class: r.class, Reason: reason, By: OriginClassifier}
			}
		}
	}
	if slices.Contains(chain, ClassConnectionRefused) {
		return Decision{Class: Systemic, Reason: "builtin: " + ClassConnectionRefused, By: OriginBuiltin}
	}
	if f.HTTP429 {
		return backpressure("outbound HTTP 429", OriginBuiltin)
	}
	for _, c := range chain {
		switch c {
		case ClassTimeout, ClassTrap, ClassMemoryExceeded, ClassPanic:
			return Decision{Class: Recoverable, Reason: "builtin: " + c, By: OriginBuiltin}
		}
	}
	return Decision{Class: Recoverable, Reason: "default", By: OriginDefault}
}
