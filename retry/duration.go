package retry

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strings"
	"time"
)

// Day is the length of the "d" unit of [ParseDuration]: 24 hours, always (no calendar, no DST).
const Day = 24 * time.Hour

// maxDurationText bounds the length of a duration [ParseDuration] reads, so that a hostile value cannot
// make it do unbounded work; no real duration comes near it.
const maxDurationText = 256

// ParseDuration reads a non-negative duration written either way a module or the config may write it:
//
//   - Go/Kotlin style: one or more components, each a decimal number (optionally with a fraction, "1.5s",
//     ".5s") directly followed by a unit: ns, us (or µs), ms, s, m, h, d (24h). Components may be
//     separated by spaces or written together ("1m 30s", "1m30s", "1d 2h"); their units must go from
//     larger to smaller, each at most once, which catches typos like "30s 1m". A bare "0" is zero.
//   - ISO-8601: P[nD][T[nH][nM][nS]], letters in either case, e.g. "PT2S", "PT1M30S", "P1DT2H", "PT0.5S".
//     Years, months and weeks are rejected (not fixed lengths); at least one component is required.
//
// Fractions finer than a nanosecond are truncated. It rejects the empty string, signs ("-1s" and "+1s"),
// a number without a unit, unknown units, and durations longer than the longest time.Duration (about
// 292 years). Every error quotes the value.
func ParseDuration(s string) (time.Duration, error) {
	d, err := parseDuration(s)
	if err != nil {
		v := s
		if len(v) > 64 {
			v = v[:64] + "..."
		}
		return 0, fmt.Errorf("retry: invalid duration %q: %w", v, err)
	}
	return d, nil
}

func parseDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	switch {
	case t == "":
		return 0, errors.New("empty")
	case len(t) > maxDurationText:
		return 0, fmt.Errorf("longer than %d characters", maxDurationText)
	case t[0] == '-':
		return 0, errors.New("must not be negative")
	case t[0] == '+':
		return 0, errors.New("no sign allowed")
	case t == "0":
		return 0, nil
	case t[0] == 'P' || t[0] == 'p':
		return parseISO(t[1:])
	}
	return parseGo(t)
}

// goUnit returns the length of a unit of the Go/Kotlin form, 0 for an unknown one. Both micro signs
// (U+00B5, which Go's time.Duration.String writes, and U+03BC) are accepted.
func goUnit(name string) time.Duration {
	switch name {
	case "d":
		return Day
	case "h":
		return time.Hour
	case "m":
		return time.Minute
	case "s":
		return time.Second
	case "ms":
		return time.Millisecond
	case "us", "\u00b5s", "\u03bcs":
		return time.Microsecond
	case "ns":
		return time.Nanosecond
	}
	return 0
}

func parseGo(s string) (time.Duration, error) {
	var total time.Duration
	last := time.Duration(math.MaxInt64) // the unit of the previous component; the next must be smaller
	for s != "" {
		num, rest, err := scanNumber(s)
		if err != nil {
			return 0, err
		}
		// The unit: the letters up to the next digit, dot or space.
		end := strings.IndexAny(rest, "0123456789. \t")
		if end < 0 {
			end = len(rest)
		}
		name := rest[:end]
		if name == "" {
			if strings.TrimSpace(rest) != "" && (rest[0] == ' ' || rest[0] == '\t') {
				return 0, fmt.Errorf("space between %q and its unit", num.text)
			}
			return 0, fmt.Errorf("missing unit after %q (use ns, us, ms, s, m, h or d)", num.text)
		}
		unit := goUnit(name)
		if unit == 0 {
			return 0, fmt.Errorf("unknown unit %q (use ns, us, ms, s, m, h or d)", name)
		}
		if unit >= last {
			return 0, fmt.Errorf("unit %q out of order (write larger units first, each once)", name)
		}
		last = unit
		v, ok := num.times(unit)
		if !ok || total > math.MaxInt64-v {
			return 0, errors.New("too long (the longest is about 292 years)")
		}
		total += v
		s = strings.TrimLeft(rest[end:], " \t")
	}
	return total, nil
}

func parseISO(s string) (time.Duration, error) {
	var total time.Duration
	inTime := false
	components := 0
	last := time.Duration(math.MaxInt64)
	for s != "" {
		if s[0] == 'T' || s[0] == 't' {
			if inTime {
				return 0, errors.New("ISO-8601: T twice")
			}
			inTime = true
			s = s[1:]
			if s == "" {
				return 0, errors.New("ISO-8601: nothing after T")
			}
			continue
		}
		num, rest, err := scanNumber(s)
		if err != nil {
			return 0, fmt.Errorf("ISO-8601: %w", err)
		}
		if rest == "" {
			return 0, fmt.Errorf("ISO-8601: missing designator after %q", num.text)
		}
		var unit time.Duration
		switch c := rest[0] | 0x20; { // lower case
		case c == 'd' && !inTime:
			unit = Day
		case c == 'h' && inTime:
			unit = time.Hour
		case c == 'm' && inTime:
			unit = time.Minute
		case c == 's' && inTime:
			unit = time.Second
		case (c == 'y' || c == 'm' || c == 'w') && !inTime:
			return 0, fmt.Errorf("ISO-8601: %q (years, months, weeks) is not a fixed length; use days", rest[:1])
		case c == 'h' || c == 'm' || c == 's':
			return 0, fmt.Errorf("ISO-8601: %q needs a T before it (e.g. PT%s%s)", rest[:1], num.text, rest[:1])
		default:
			return 0, fmt.Errorf("ISO-8601: unknown designator %q", rest[:1])
		}
		if unit >= last {
			return 0, fmt.Errorf("ISO-8601: %q out of order or twice", rest[:1])
		}
		last = unit
		v, ok := num.times(unit)
		if !ok || total > math.MaxInt64-v {
			return 0, errors.New("too long (the longest is about 292 years)")
		}
		total += v
		components++
		s = rest[1:]
	}
	if components == 0 {
		return 0, errors.New("ISO-8601: no components (e.g. PT2S)")
	}
	return total, nil
}

// number is a non-negative decimal read by scanNumber: whole + frac/scale.
type number struct {
	text  string
	whole uint64 // saturates at math.MaxUint64 (then times reports overflow)
	frac  uint64 // the first up to 18 fraction digits
	scale uint64 // 10^(number of digits in frac); 1 when there are none
}

// scanNumber reads digits, optionally "." and more digits, with at least one digit in all.
func scanNumber(s string) (number, string, error) {
	n := number{scale: 1}
	i := 0
	digits := 0
	for ; i < len(s) && '0' <= s[i] && s[i] <= '9'; i++ {
		hi, lo := bits.Mul64(n.whole, 10)
		lo, carry := bits.Add64(lo, uint64(s[i]-'0'), 0)
		if hi != 0 || carry != 0 {
			n.whole = math.MaxUint64
		} else if n.whole != math.MaxUint64 {
			n.whole = lo
		}
		digits++
	}
	if i < len(s) && s[i] == '.' {
		i++
		for ; i < len(s) && '0' <= s[i] && s[i] <= '9'; i++ {
			if n.scale < 1e18 {
				n.frac = n.frac*10 + uint64(s[i]-'0')
				n.scale *= 10
			}
			digits++
		}
	}
	n.text = s[:i]
	if digits == 0 {
		if i > 0 {
			return n, s, errors.New("a lone \".\" is not a number")
		}
		r := s
		if len(r) > 8 {
			r = r[:8] + "..."
		}
		return n, s, fmt.Errorf("expected a number at %q", r)
	}
	return n, s[i:], nil
}

// times returns n*unit in nanoseconds, truncated, and false when it does not fit in a time.Duration.
func (n number) times(unit time.Duration) (time.Duration, bool) {
	u := uint64(unit)
	hi, whole := bits.Mul64(n.whole, u)
	if hi != 0 || whole > math.MaxInt64 {
		return 0, false
	}
	// frac < scale, so frac*u/scale < u and the quotient fits; hi < scale so Div64 cannot panic.
	fhi, flo := bits.Mul64(n.frac, u)
	part, _ := bits.Div64(fhi, flo, n.scale)
	if whole > math.MaxInt64-part {
		return 0, false
	}
	return time.Duration(whole + part), true
}

// Duration is a time.Duration that TOML (or any encoding.TextUnmarshaler user) reads with [ParseDuration]
// and writes in Go form ("1m30s"), which ParseDuration reads back. Its zero value means "inherit" in the
// settings.
type Duration time.Duration

// UnmarshalText implements encoding.TextUnmarshaler with [ParseDuration].
func (d *Duration) UnmarshalText(text []byte) error {
	v, err := ParseDuration(string(text))
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// MarshalText implements encoding.TextMarshaler: the Go form ("1m30s"). A negative duration is an error,
// since [ParseDuration] would not read it back.
func (d Duration) MarshalText() ([]byte, error) {
	if d < 0 {
		return nil, fmt.Errorf("retry: negative duration %s cannot be written", time.Duration(d))
	}
	return []byte(time.Duration(d).String()), nil
}

// String returns the Go form of the duration, e.g. "1m30s".
func (d Duration) String() string { return time.Duration(d).String() }

// Std returns d as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }
