package retry

import (
	"errors"
	"fmt"
	"time"
)

// The TOML keys of the long-horizon retry settings ([subscription.parked] and
// [subscriptions."<handler>".parked]).
const (
	KeyParkedMaxRetries = "max-retries"
	KeyParkedFirstDelay = "first-delay"
	KeyParkedMaxDelay   = "max-delay"
	KeyParkedTimeout    = "timeout"
	// KeyParkedRetryUnrecoverable opts an unrecoverable park in to the long-horizon retries.
	KeyParkedRetryUnrecoverable = "retry-unrecoverable"
)

// Default long-horizon retry settings, as returned by [DefaultParked].
const (
	DefaultParkedMaxRetries = 10
	DefaultParkedFirstDelay = 3 * time.Minute
	// DefaultParkedMaxDelay caps the growing delay at an hour: a parked aggregate is still looked at
	// hourly late in its horizon, so a fixed outside system is picked up within the hour, while the whole
	// horizon (about 6.5 hours) stays within a working day, after which an operator decides.
	DefaultParkedMaxDelay = time.Hour
	DefaultParkedTimeout  = 2 * time.Minute
)

// NoParkedRetries, as ParkedSettings.MaxRetries, turns the long-horizon retries off: a parked aggregate
// waits for an operator at once. (0 cannot say so, since 0 inherits.)
const NoParkedRetries = -1

// ParkedSettings is one layer of the long-horizon retries of a parked aggregate ([subscription.parked]).
// A zero field is inherited from the layer below; see [ResolveParked].
type ParkedSettings struct {
	// MaxRetries is the number of long-horizon retries (default 10); [NoParkedRetries] for none.
	MaxRetries int
	// FirstDelay is the delay from the park to the first retry (default 3m); each next delay doubles.
	FirstDelay time.Duration
	// MaxDelay caps the growing delay (default 1h).
	MaxDelay time.Duration
	// Timeout is how long one long-horizon attempt may run (default 2m).
	Timeout time.Duration
	// RetryUnrecoverable, when SwitchOn, gives an aggregate parked for an unrecoverable failure the same
	// long-horizon retries as one whose budget ran out. By default (SwitchOff) it is parked for an operator
	// with no retry, since no retry fixes it (docs/failure-model.md, section 5). [SwitchInherit] (zero) is
	// inherited.
	RetryUnrecoverable Switch
}

// RetriesUnrecoverable reports whether an unrecoverable park gets long-horizon retries.
func (p ParkedSettings) RetriesUnrecoverable() bool { return p.RetryUnrecoverable == SwitchOn }

// Switch is a setting that is on or off, or inherited from the layer below (the zero value), so that a
// layer can turn off what a lower one turned on.
type Switch int8

// The values of a Switch.
const (
	SwitchInherit Switch = 0
	SwitchOn      Switch = 1
	SwitchOff     Switch = -1
)

// SwitchOf is the Switch of an optional TOML boolean: nil inherits.
func SwitchOf(b *bool) Switch {
	switch {
	case b == nil:
		return SwitchInherit
	case *b:
		return SwitchOn
	}
	return SwitchOff
}

// DefaultParked returns the built-in long-horizon settings: 10 retries, the first 3m after the park, each
// next delay twice the previous up to 1h, 2m per attempt, none for an unrecoverable park. See [ParkedSettings.Delay] for the schedule.
func DefaultParked() ParkedSettings {
	return ParkedSettings{
		MaxRetries:         DefaultParkedMaxRetries,
		FirstDelay:         DefaultParkedFirstDelay,
		MaxDelay:           DefaultParkedMaxDelay,
		Timeout:            DefaultParkedTimeout,
		RetryUnrecoverable: SwitchOff,
	}
}

// ResolveParked layers long-horizon settings field by field: [DefaultParked] first, then each layer in
// order overrides the non-zero fields of those below (host order: [subscription.parked], then the
// subscription's own). It does not validate; see [ParkedSettings.Validate].
func ResolveParked(layers ...ParkedSettings) ParkedSettings {
	p := DefaultParked()
	for _, l := range layers {
		if l.MaxRetries != 0 {
			p.MaxRetries = l.MaxRetries
		}
		if l.FirstDelay != 0 {
			p.FirstDelay = l.FirstDelay
		}
		if l.MaxDelay != 0 {
			p.MaxDelay = l.MaxDelay
		}
		if l.Timeout != 0 {
			p.Timeout = l.Timeout
		}
		if l.RetryUnrecoverable != SwitchInherit {
			p.RetryUnrecoverable = l.RetryUnrecoverable
		}
	}
	return p
}

// Validate reports every unusable field, joined; each is a [*SettingError] naming the TOML key and the
// value: MaxRetries below [NoParkedRetries], a negative duration, MaxDelay below FirstDelay when both are
// set. Zero values are valid (they inherit); validate the result of [ResolveParked] too to catch a
// FirstDelay above an inherited MaxDelay.
func (p ParkedSettings) Validate() error {
	var errs []error
	if p.MaxRetries < NoParkedRetries {
		errs = append(errs, settingErr(KeyParkedMaxRetries, fmt.Sprint(p.MaxRetries),
			"must be at least 1, or -1 for none (0 inherits)"))
	}
	errs = appendDurationErrs(errs, KeyParkedFirstDelay, p.FirstDelay)
	errs = appendDurationErrs(errs, KeyParkedMaxDelay, p.MaxDelay)
	errs = appendDurationErrs(errs, KeyParkedTimeout, p.Timeout)
	if p.FirstDelay > 0 && p.MaxDelay > 0 && p.MaxDelay < p.FirstDelay {
		errs = append(errs, settingErr(KeyParkedMaxDelay, quoteDuration(p.MaxDelay),
			"is less than %s = %s", KeyParkedFirstDelay, quoteDuration(p.FirstDelay)))
	}
	return errors.Join(errs...)
}

// Delay returns the delay before long-horizon retry number retry (1-based), measured from the park for
// retry 1 and from the previous retry after that: FirstDelay * 2^(retry-1), capped at MaxDelay, without
// overflow. A retry below 1 is taken as 1. The default schedule (delay, then time since the park):
//
//	retry  1:  3m   (3m)
//	retry  2:  6m   (9m)
//	retry  3: 12m  (21m)
//	retry  4: 24m  (45m)
//	retry  5: 48m  (1h33m)
//	retry  6:  1h  (2h33m)
//	retry  7:  1h  (3h33m)
//	retry  8:  1h  (4h33m)
//	retry  9:  1h  (5h33m)
//	retry 10:  1h  (6h33m), then the aggregate waits for an operator.
func (p ParkedSettings) Delay(retry int) time.Duration {
	return doubling(p.FirstDelay, p.MaxDelay, retry)
}

// Next returns when the next long-horizon retry is due, given how many were done and when the last of
// them (or, with none done, the park) happened: last + Delay(retriesDone+1). ok is false, and at zero, when
// the retries are spent (retriesDone >= MaxRetries, or MaxRetries is [NoParkedRetries]). A negative
// retriesDone counts as 0.
func (p ParkedSettings) Next(retriesDone int, last time.Time) (at time.Time, ok bool) {
	retriesDone = max(retriesDone, 0)
	if p.MaxRetries <= 0 || retriesDone >= p.MaxRetries {
		return time.Time{}, false
	}
	return last.Add(p.Delay(retriesDone + 1)), true
}

// ParkedConfig is the TOML form of [ParkedSettings] ([subscription.parked]), with durations read by
// [ParseDuration].
type ParkedConfig struct {
	MaxRetries int      `toml:"max-retries"`
	FirstDelay Duration `toml:"first-delay"`
	MaxDelay   Duration `toml:"max-delay"`
	Timeout    Duration `toml:"timeout"`
	// RetryUnrecoverable is retry-unrecoverable; left out (nil), it is inherited.
	RetryUnrecoverable *bool `toml:"retry-unrecoverable"`
}

// Parked returns the settings the config holds.
func (c ParkedConfig) Parked() ParkedSettings {
	return ParkedSettings{
		MaxRetries:         c.MaxRetries,
		FirstDelay:         time.Duration(c.FirstDelay),
		MaxDelay:           time.Duration(c.MaxDelay),
		Timeout:            time.Duration(c.Timeout),
		RetryUnrecoverable: SwitchOf(c.RetryUnrecoverable),
	}
}
