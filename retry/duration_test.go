package retry

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"0", 0},
		{"0s", 0},
		{"500ms", 500 * time.Millisecond},
		{"2s", 2 * time.Second},
		{"1m 30s", 90 * time.Second},
		{"1m30s", 90 * time.Second},
		{"  1m   30s ", 90 * time.Second},
		{"1h", time.Hour},
		{"1d", 24 * time.Hour},
		{"1d 2h", 26 * time.Hour},
		{"1.5s", 1500 * time.Millisecond},
		{".5s", 500 * time.Millisecond},
		{"1.s", time.Second},
		{"1.5h30m", 2 * time.Hour},
		{"1h2m3s4ms5us6ns", time.Hour + 2*time.Minute + 3*time.Second + 4*time.Millisecond + 5*time.Microsecond + 6},
		{"7\u00b5s", 7 * time.Microsecond},
		{"7\u03bcs", 7 * time.Microsecond},
		{"0.1ns", 0},
		{"1.999999999999999999999s", 1999999999},
		{"000000000000000000000000001s", time.Second},
		{"2562047h47m16.854775807s", math.MaxInt64},
		{"PT2S", 2 * time.Second},
		{"PT1M30S", 90 * time.Second},
		{"P1DT2H", 26 * time.Hour},
		{"PT0.5S", 500 * time.Millisecond},
		{"P1D", 24 * time.Hour},
		{"pt2s", 2 * time.Second},
		{"PT1H0.5M", time.Hour + 30*time.Second},
		{"PT0S", 0},
	}
	for _, tt := range tests {
		got, err := ParseDuration(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestParseDurationErrors(t *testing.T) {
	tests := []struct{ in, why string }{
		{"", "empty"},
		{"   ", "empty"},
		{"-1s", "negative"},
		{"+1s", "sign"},
		{"-PT1S", "negative"},
		{"5", "missing unit"},
		{"1 m", "space between"},
		{"abc", "expected a number"},
		{"1x", "unknown unit"},
		{"1S", "unknown unit"},
		{"30s 1m", "out of order"},
		{"1s1s", "out of order"},
		{".s", "lone"},
		{"1.5.5s", "missing unit"},
		{"2562047h47m16.854775808s", "too long"},
		{"106751d 24h", "too long"},
		{"106752d", "too long"},
		{"99999999999999999999999s", "too long"},
		{"18446744073709551616ns", "too long"},
		{"P", "no components"},
		{"PT", "nothing after T"},
		{"P1DT", "nothing after T"},
		{"P1Y", "not a fixed length"},
		{"P1M", "not a fixed length"},
		{"P1W", "not a fixed length"},
		{"P1H", "needs a T"},
		{"PT1D", "unknown designator"},
		{"PT1S1M", "out of order"},
		{"PT1", "missing designator"},
		{"PTT1S", "T twice"},
		{"P1DT1H T1S", "ISO-8601"},
		{"Infinity", "expected a number"},
		{strings.Repeat("1", 300) + "s", "longer than"},
	}
	for _, tt := range tests {
		got, err := ParseDuration(tt.in)
		if err == nil {
			t.Errorf("ParseDuration(%q) = %v, want an error (%s)", tt.in, got, tt.why)
			continue
		}
		if !strings.Contains(err.Error(), tt.why) {
			t.Errorf("ParseDuration(%q) error %q does not say %q", tt.in, err, tt.why)
		}
		checkDurationErrorNamesValue(t, tt.in, err)
	}
}

// checkDurationErrorNamesValue checks that the error quotes the value (its first 64 bytes for long ones).
func checkDurationErrorNamesValue(t *testing.T, in string, err error) {
	t.Helper()
	v := in
	if len(v) > 64 {
		v = v[:64]
	}
	q := strconv.Quote(v)
	q = q[:len(q)-1] // without the closing quote: a long value is cut and followed by "..."
	if !strings.Contains(err.Error(), q) {
		t.Errorf("ParseDuration(%q) error %q does not name the value", in, err)
	}
}

func TestDurationText(t *testing.T) {
	var d Duration
	if err := d.UnmarshalText([]byte("1m 30s")); err != nil || d.Std() != 90*time.Second {
		t.Fatalf("UnmarshalText = %v, %v", d, err)
	}
	b, err := d.MarshalText()
	if err != nil || string(b) != "1m30s" || d.String() != "1m30s" {
		t.Fatalf("MarshalText = %q, %v", b, err)
	}
	if err := d.UnmarshalText([]byte("soon")); err == nil || !strings.Contains(err.Error(), `"soon"`) {
		t.Fatalf("UnmarshalText(soon) error = %v", err)
	}
	if d.Std() != 90*time.Second {
		t.Fatalf("a failed UnmarshalText changed the value to %v", d)
	}
	if _, err := Duration(-1).MarshalText(); err == nil {
		t.Fatal("MarshalText of a negative duration: no error")
	}
	for _, v := range []time.Duration{0, 1, 1500, time.Minute + 1, math.MaxInt64} {
		b, err := Duration(v).MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back Duration
		if err := back.UnmarshalText(b); err != nil || back.Std() != v {
			t.Errorf("round trip of %v via %q = %v, %v", v, b, back, err)
		}
	}
}

func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"0", "500ms", "1m 30s", "1m30s", "1d", "1.5s", "PT2S", "PT1M30S", "P1DT2H",
		"PT0.5S", "-1s", "", "garbage", "2562047h47m16.854775808s", "1.9999999999999999999999h", "P1M", "7µs"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		if err != nil {
			if !strings.Contains(err.Error(), "invalid duration") {
				t.Fatalf("error %q does not say what it is", err)
			}
			checkDurationErrorNamesValue(t, s, err)
			return
		}
		if d < 0 {
			t.Fatalf("ParseDuration(%q) = %v, negative", s, d)
		}
		// What Go prints, ParseDuration reads back.
		back, err := ParseDuration(d.String())
		if err != nil || back != d {
			t.Fatalf("ParseDuration(%q) = %v; reading back %q gives %v, %v", s, d, d.String(), back, err)
		}
	})
}
