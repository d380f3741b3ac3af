package config

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Size is a number of bytes. TOML writes it either as a string with a 1024-based unit ("512KiB",
// "32MiB", "1GiB", "100B", "4096") or as a plain integer byte count (4096).
type Size int64

// The units [ParseSize] reads.
const (
	Byte Size = 1
	KiB  Size = 1 << 10
	MiB  Size = 1 << 20
	GiB  Size = 1 << 30
	TiB  Size = 1 << 40
)

// sizeUnits is the units ParseSize accepts, largest first (MarshalText writes the largest exact one).
func sizeUnits() []struct {
	name string
	size Size
} {
	return []struct {
		name string
		size Size
	}{{"TiB", TiB}, {"GiB", GiB}, {"MiB", MiB}, {"KiB", KiB}, {"B", Byte}}
}

// ParseSize reads a non-negative size: digits, optionally followed (with or without a space) by one of
// the units B, KiB, MiB, GiB, TiB (case-insensitive). Without a unit the number is a byte count. Decimal
// units (KB, MB, GB, K, M, G) are rejected as ambiguous; fractions, signs and sizes above 2^63-1 bytes are
// rejected. The error quotes the value.
func ParseSize(s string) (Size, error) {
	v, err := parseSize(s)
	if err != nil {
		return 0, fmt.Errorf("invalid size %q: %w", s, err)
	}
	return v, nil
}

func parseSize(s string) (Size, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, errors.New("empty")
	}
	if len(t) > 64 {
		return 0, errors.New("too long")
	}
	i := 0
	for i < len(t) && '0' <= t[i] && t[i] <= '9' {
		i++
	}
	if i == 0 {
		if t[0] == '-' {
			return 0, errors.New("must not be negative")
		}
		return 0, errors.New("expected a number, e.g. 32MiB or 4096")
	}
	n, err := strconv.ParseInt(t[:i], 10, 64)
	if err != nil {
		return 0, errors.New("too large")
	}
	unit := strings.TrimSpace(t[i:])
	if unit == "" {
		return Size(n), nil
	}
	if unit[0] == '.' {
		return 0, errors.New("fractions are not allowed; use a smaller unit (1536MiB, not 1.5GiB)")
	}
	for _, u := range sizeUnits() {
		if strings.EqualFold(unit, u.name) {
			if n > math.MaxInt64/int64(u.size) {
				return 0, errors.New("too large")
			}
			return Size(n) * u.size, nil
		}
	}
	switch strings.ToUpper(unit) {
	case "K", "KB", "M", "MB", "G", "GB", "T", "TB":
		return 0, fmt.Errorf("ambiguous unit %q: write KiB, MiB, GiB or TiB (1024-based)", unit)
	}
	return 0, fmt.Errorf("unknown unit %q (use B, KiB, MiB, GiB or TiB)", unit)
}

// String writes the size with the largest unit that divides it exactly: "32MiB", "1536KiB", "100B".
func (s Size) String() string {
	if s == 0 {
		return "0B"
	}
	for _, u := range sizeUnits() {
		if s%u.size == 0 {
			return strconv.FormatInt(int64(s/u.size), 10) + u.name
		}
	}
	return strconv.FormatInt(int64(s), 10) + "B"
}

// MarshalText implements encoding.TextMarshaler with [Size.String]. A negative size is an error.
func (s Size) MarshalText() ([]byte, error) {
	if s < 0 {
		return nil, fmt.Errorf("negative size %d cannot be written", int64(s))
	}
	return []byte(s.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler with [ParseSize].
func (s *Size) UnmarshalText(text []byte) error {
	v, err := ParseSize(string(text))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// setTOMLInt takes a TOML integer as a byte count.
func (s *Size) setTOMLInt(n int64) error {
	if n < 0 {
		return errors.New("must not be negative")
	}
	*s = Size(n)
	return nil
}

// Bytes returns the size as an int64 byte count.
func (s Size) Bytes() int64 { return int64(s) }
