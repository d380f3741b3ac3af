package config

import (
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want Size
		err  string
	}{
		{"0", 0, ""}, {"4096", 4096, ""}, {"100B", 100, ""}, {"512KiB", 512 << 10, ""}, {"32MiB", 32 << 20, ""},
		{"1GiB", 1 << 30, ""}, {"2 TiB", 2 << 40, ""}, {"64kib", 64 << 10, ""}, {" 1MiB ", 1 << 20, ""},
		{"", 0, `invalid size "": empty`}, {"32MB", 0, `ambiguous unit "MB"`}, {"1k", 0, "ambiguous unit"},
		{"1.5GiB", 0, "fractions are not allowed"}, {"-1KiB", 0, "must not be negative"},
		{"lots", 0, "expected a number"}, {"9999999999TiB", 0, "too large"},
		{"99999999999999999999", 0, "too large"}, {"3 parsecs", 0, `unknown unit "parsecs"`},
	}
	for _, tt := range tests {
		got, err := ParseSize(tt.in)
		switch {
		case tt.err == "" && (err != nil || got != tt.want):
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("ParseSize(%q) error = %v; want %q", tt.in, err, tt.err)
		}
	}
}

func TestSizeRoundTrip(t *testing.T) {
	for _, s := range []Size{0, 1, 1023, KiB, 1536 * KiB, 64 * MiB, 3 * GiB, 5 * TiB, 5*TiB + 1} {
		b, err := s.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back Size
		if err := back.UnmarshalText(b); err != nil || back != s {
			t.Errorf("%d -> %s -> %d, %v", s, b, back, err)
		}
	}
	if (32*MiB).String() != "32MiB" || (1536*KiB).String() != "1536KiB" {
		t.Error("String does not pick the largest exact unit")
	}
	if _, err := Size(-1).MarshalText(); err == nil {
		t.Error("negative size marshalled")
	}
}
