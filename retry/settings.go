package retry

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The TOML keys of the retry settings ([subscription.retry] and [subscriptions."<handler>".retry]). They
// key [Policy.Sources] and name the setting in every validation error.
const (
	KeyMaxAttempts          = "max-attempts"
	KeyInitialBackoff       = "initial-backoff"
	KeyMaxBackoff           = "max-backoff"
	KeyTimeout              = "timeout"
	KeyUnrecoverable        = "unrecoverable"
	KeyRecoverable          = "recoverable"
	KeyBackpressureAttempts = "backpressure-attempts"
)

// Default retry settings, as returned by [Defaults]: 5 attempts in all, waiting 100ms after the first
// failure and twice as long after each next one up to 5s, 30s per attempt, 20 attempts for backpressure.
const (
	DefaultMaxAttempts          = 5
	DefaultInitialBackoff       = 100 * time.Millisecond
	DefaultMaxBackoff           = 5 * time.Second
	DefaultTimeout              = 30 * time.Second
	DefaultBackpressureAttempts = 20
)

// Settings is one layer of retry settings. A zero field (and a nil list) is inherited from the layer
// below; see [Resolve]. Defaults are those of [Defaults].
type Settings struct {
	// MaxAttempts is the number of calls in all, at least 1 (default 5). 1 means no retry.
	MaxAttempts int
	// InitialBackoff is the wait after the first failure; each next wait is twice as long (default 100ms).
	InitialBackoff time.Duration
	// MaxBackoff is the longest wait between attempts (default 5s).
	MaxBackoff time.Duration
	// Timeout is how long one attempt may run; a longer one is cancelled and counts as failed (default 30s).
	Timeout time.Duration
	// Unrecoverable lists error class names that park the aggregate at once, without a retry (default
	// none). A nil list is inherited; an empty, non-nil list clears the inherited one.
	Unrecoverable []string
	// Recoverable lists error class names that are retried within the budget even where they would
	// otherwise be taken for an outage (default none). A nil list is inherited; an empty, non-nil list
	// clears the inherited one.
	Recoverable []string
	// BackpressureAttempts is the number of attempts allowed for backpressure failures before the
	// aggregate is parked (default 20).
	BackpressureAttempts int
}

// Source names the layer a setting came from.
type Source string

// The layers of retry settings, lowest first: the host's order is default < processor < handler < override.
const (
	// SourceDefault is the built-in default of [Defaults].
	SourceDefault Source = "default"
	// SourceProcessor is the processor-wide settings (the guest's processor-level retry declaration, or
	// the host's [subscription.retry]).
	SourceProcessor Source = "processor"
	// SourceHandler is the settings a handler declares for itself.
	SourceHandler Source = "handler"
	// SourceOverride is the host's per-subscription override ([subscriptions."<handler>".retry]).
	SourceOverride Source = "override"
)

// Layer is one layer of settings and where it came from.
type Layer struct {
	Source   Source
	Settings Settings
}

// Defaults returns the built-in retry settings: MaxAttempts 5, InitialBackoff 100ms, MaxBackoff 5s,
// Timeout 30s, no unrecoverable or recoverable classes, BackpressureAttempts 20.
func Defaults() Settings {
	return Settings{
		MaxAttempts:          DefaultMaxAttempts,
		InitialBackoff:       DefaultInitialBackoff,
		MaxBackoff:           DefaultMaxBackoff,
		Timeout:              DefaultTimeout,
		BackpressureAttempts: DefaultBackpressureAttempts,
	}
}

// Policy is the effective, fully resolved retry settings of one handler, plus where each came from.
// Build it with [Resolve]; its fields mean what the same fields of [Settings] mean.
type Policy struct {
	MaxAttempts                         int
	InitialBackoff, MaxBackoff, Timeout time.Duration
	Unrecoverable, Recoverable          []string
	BackpressureAttempts                int
	// Sources says which layer each setting came from, keyed by the TOML key (KeyMaxAttempts, ...).
	// Every key is present.
	Sources map[string]Source
	// Classes is the error class tree the handler's module declares, which [Classify] reads a failure's
	// chain by (see [ClassTree.Resolve]); nil: none known, the chain is taken as sent. [Resolve] leaves it
	// nil: it is the module's, not a layer's.
	Classes *ClassTree
}

// Resolve layers retry settings setting by setting: [Defaults] (as [SourceDefault]) first, then each layer
// in order overrides the non-zero fields of those below it; a non-nil list replaces the list below
// (so an empty, non-nil list clears it). The host's order is default < processor < handler < override.
//
// Resolve does not validate: check each layer with [Settings.Validate] as it is loaded, and the result with
// [Policy.Validate], which also catches what only the combination gets wrong (an InitialBackoff above an
// inherited MaxBackoff). The lists of the Policy are copies; the layers are not modified.
func Resolve(layers ...Layer) Policy {
	d := Defaults()
	p := Policy{
		MaxAttempts:          d.MaxAttempts,
		InitialBackoff:       d.InitialBackoff,
		MaxBackoff:           d.MaxBackoff,
		Timeout:              d.Timeout,
		BackpressureAttempts: d.BackpressureAttempts,
		Sources: map[string]Source{
			KeyMaxAttempts:          SourceDefault,
			KeyInitialBackoff:       SourceDefault,
			KeyMaxBackoff:           SourceDefault,
			KeyTimeout:              SourceDefault,
			KeyUnrecoverable:        SourceDefault,
			KeyRecoverable:          SourceDefault,
			KeyBackpressureAttempts: SourceDefault,
		},
	}
	for _, l := range layers {
		s := l.Settings
		if s.MaxAttempts != 0 {
			p.MaxAttempts, p.Sources[KeyMaxAttempts] = s.MaxAttempts, l.Source
		}
		if s.InitialBackoff != 0 {
			p.InitialBackoff, p.Sources[KeyInitialBackoff] = s.InitialBackoff, l.Source
		}
		if s.MaxBackoff != 0 {
			p.MaxBackoff, p.Sources[KeyMaxBackoff] = s.MaxBackoff, l.Source
		}
		if s.Timeout != 0 {
			p.Timeout, p.Sources[KeyTimeout] = s.Timeout, l.Source
		}
		if s.Unrecoverable != nil {
			p.Unrecoverable, p.Sources[KeyUnrecoverable] = s.Unrecoverable, l.Source
		}
		if s.Recoverable != nil {
			p.Recoverable, p.Sources[KeyRecoverable] = s.Recoverable, l.Source
		}
		if s.BackpressureAttempts != 0 {
			p.BackpressureAttempts, p.Sources[KeyBackpressureAttempts] = s.BackpressureAttempts, l.Source
		}
	}
	// Copy so that the Policy never aliases a layer; keep nil as nil and empty as empty.
	if p.Unrecoverable != nil {
		p.Unrecoverable = slices.Clone(p.Unrecoverable)
	}
	if p.Recoverable != nil {
		p.Recoverable = slices.Clone(p.Recoverable)
	}
	return p
}

// Settings returns the policy's values as a [Settings] layer (without the sources).
func (p Policy) Settings() Settings {
	return Settings{
		MaxAttempts:          p.MaxAttempts,
		InitialBackoff:       p.InitialBackoff,
		MaxBackoff:           p.MaxBackoff,
		Timeout:              p.Timeout,
		Unrecoverable:        slices.Clone(p.Unrecoverable),
		Recoverable:          slices.Clone(p.Recoverable),
		BackpressureAttempts: p.BackpressureAttempts,
	}
}

// SettingError is a setting with a value that cannot be used. Its message names the setting (by its TOML
// key) and the value, e.g. `retry: max-attempts = -1: must be at least 1 (0 inherits)`.
type SettingError struct {
	Setting string // the TOML key, e.g. "max-backoff" or "unrecoverable[2]"
	Value   string // the offending value as written in TOML
	Problem string // what is wrong with it
}

// Error implements error.
func (e *SettingError) Error() string {
	return fmt.Sprintf("retry: %s = %s: %s", e.Setting, e.Value, e.Problem)
}

func settingErr(key, value, format string, args ...any) error {
	return &SettingError{Setting: key, Value: value, Problem: fmt.Sprintf(format, args...)}
}

// Validate reports every unusable setting of one layer, joined (see [errors.Join]); each is a
// [*SettingError] naming the setting by its TOML key and the value: a negative MaxAttempts or
// BackpressureAttempts, a negative duration, a MaxBackoff below InitialBackoff when the layer sets both, an
// empty or padded class name, a class listed twice in the same list. Zero values are valid (they inherit).
// A class in both lists is valid: the unrecoverable list wins (see [Classify]).
func (s Settings) Validate() error {
	var errs []error
	if s.MaxAttempts < 0 {
		errs = append(errs, settingErr(KeyMaxAttempts, fmt.Sprint(s.MaxAttempts), "must be at least 1 (0 inherits)"))
	}
	errs = appendDurationErrs(errs, KeyInitialBackoff, s.InitialBackoff)
	errs = appendDurationErrs(errs, KeyMaxBackoff, s.MaxBackoff)
	errs = appendDurationErrs(errs, KeyTimeout, s.Timeout)
	if s.InitialBackoff > 0 && s.MaxBackoff > 0 && s.MaxBackoff < s.InitialBackoff {
		errs = append(errs, settingErr(KeyMaxBackoff, quoteDuration(s.MaxBackoff),
			"is less than %s = %s", KeyInitialBackoff, quoteDuration(s.InitialBackoff)))
	}
	errs = appendClassListErrs(errs, KeyUnrecoverable, s.Unrecoverable)
	errs = appendClassListErrs(errs, KeyRecoverable, s.Recoverable)
	if s.BackpressureAttempts < 0 {
		errs = append(errs, settingErr(KeyBackpressureAttempts, fmt.Sprint(s.BackpressureAttempts), "must be at least 1 (0 inherits)"))
	}
	return errors.Join(errs...)
}

// Validate checks a resolved policy: everything [Settings.Validate] checks, with every value set, so that
// a MaxBackoff below an InitialBackoff from another layer is reported too. The error names the layers
// the two values came from.
func (p Policy) Validate() error {
	s := p.Settings()
	var errs []error
	// Validate the values one by one without the pairwise check, then check the pair with sources.
	pair := s.InitialBackoff > 0 && s.MaxBackoff > 0 && s.MaxBackoff < s.InitialBackoff
	if pair {
		s.MaxBackoff = 0
	}
	if s.MaxAttempts == 0 {
		errs = append(errs, settingErr(KeyMaxAttempts, "0", "must be at least 1"))
	}
	if s.BackpressureAttempts == 0 {
		errs = append(errs, settingErr(KeyBackpressureAttempts, "0", "must be at least 1"))
	}
	for _, c := range []struct {
		key string
		d   time.Duration
	}{{KeyInitialBackoff, p.InitialBackoff}, {KeyMaxBackoff, p.MaxBackoff}, {KeyTimeout, p.Timeout}} {
		if c.d == 0 {
			errs = append(errs, settingErr(c.key, quoteDuration(c.d), "must be more than 0"))
		}
	}
	if err := s.Validate(); err != nil {
		errs = append(errs, err)
	}
	if pair {
		errs = append(errs, settingErr(KeyMaxBackoff, quoteDuration(p.MaxBackoff),
			"(from %s) is less than %s = %s (from %s)", p.Sources[KeyMaxBackoff],
			KeyInitialBackoff, quoteDuration(p.InitialBackoff), p.Sources[KeyInitialBackoff]))
	}
	return errors.Join(errs...)
}

func appendDurationErrs(errs []error, key string, d time.Duration) []error {
	if d < 0 {
		errs = append(errs, settingErr(key, quoteDuration(d), "must not be negative"))
	}
	return errs
}

func appendClassListErrs(errs []error, key string, classes []string) []error {
	for i, c := range classes {
		k := fmt.Sprintf("%s[%d]", key, i)
		switch {
		case c == "":
			errs = append(errs, settingErr(k, fmt.Sprintf("%q", c), "empty class name"))
		case strings.TrimSpace(c) != c:
			errs = append(errs, settingErr(k, fmt.Sprintf("%q", c), "class name has leading or trailing space"))
		case slices.Index(classes, c) < i:
			errs = append(errs, settingErr(k, fmt.Sprintf("%q", c), "listed twice (also at %s[%d])", key, slices.Index(classes, c)))
		}
	}
	return errs
}

// quoteDuration renders a duration the way it would be written in TOML.
func quoteDuration(d time.Duration) string {
	return fmt.Sprintf("%q", d.String())
}

// Config is the TOML form of [Settings] ([subscription.retry] and [subscriptions."<handler>".retry]), with
// durations read by [ParseDuration] ("1m 30s", "PT2S", ...). Decode into it, then call [Config.Settings].
type Config struct {
	MaxAttempts          int      `toml:"max-attempts"`
	InitialBackoff       Duration `toml:"initial-backoff"`
	MaxBackoff           Duration `toml:"max-backoff"`
	Timeout              Duration `toml:"timeout"`
	Unrecoverable        []string `toml:"unrecoverable"`
	Recoverable          []string `toml:"recoverable"`
	BackpressureAttempts int      `toml:"backpressure-attempts"`
}

// Settings returns the layer the config holds.
func (c Config) Settings() Settings {
	return Settings{
		MaxAttempts:          c.MaxAttempts,
		InitialBackoff:       time.Duration(c.InitialBackoff),
		MaxBackoff:           time.Duration(c.MaxBackoff),
		Timeout:              time.Duration(c.Timeout),
		Unrecoverable:        c.Unrecoverable,
		Recoverable:          c.Recoverable,
		BackpressureAttempts: c.BackpressureAttempts,
	}
}
