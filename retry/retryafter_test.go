package retry

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	date := func(d time.Duration) string { return now.Add(d).Format(http1123) }
	tests := []struct {
		name, value string
		want        time.Duration
	}{
		{"absent", "", 0},
		{"blank", "   ", 0},
		{"zero", "0", 0},
		{"seconds", "7", 7 * time.Second},
		{"seconds with space", " 7 ", 7 * time.Second},
		{"leading zeros", "0007", 7 * time.Second},
		{"just under the cap", strconv.Itoa(int(MaxRetryAfter/time.Second) - 1), MaxRetryAfter - time.Second},
		{"the cap", strconv.Itoa(int(MaxRetryAfter / time.Second)), MaxRetryAfter},
		{"a day", "86400", MaxRetryAfter},
		{"2^40 seconds", strconv.Itoa(1 << 40), MaxRetryAfter},
		{"max int64 seconds", strconv.FormatInt(math.MaxInt64, 10), MaxRetryAfter},
		{"beyond int64", "99999999999999999999", MaxRetryAfter},
		{"a hundred digits", "1" + strings.Repeat("9", 99), MaxRetryAfter},
		{"negative", "-5", 0},
		{"plus sign", "+5", 0},
		{"fraction", "1.5", 0},
		{"garbage", "x", 0},
		{"seconds and garbage", "5 s", 0},
		{"http date", date(30 * time.Second), 30 * time.Second},
		{"http date past", date(-time.Hour), 0},
		{"http date now", date(0), 0},
		{"http date beyond the cap", date(2 * time.Hour), MaxRetryAfter},
		{"far-future http date", "Fri, 31 Dec 9999 23:59:59 GMT", MaxRetryAfter},
		{"rfc 850 date", now.Add(time.Minute).Format(time.RFC850), time.Minute},
		{"asctime date", now.Add(time.Minute).Format(time.ANSIC), time.Minute},
		{"date garbage", "Mon, 99 Foo 2030 25:61:61 GMT", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ParseRetryAfter(tt.value, now); got != tt.want {
				t.Errorf("ParseRetryAfter(%q) = %v, want %v", tt.value, got, tt.want)
			}
		})
	}
}

// http1123 is the IMF-fixdate layout of RFC 9110 (http.TimeFormat, in GMT).
const http1123 = "Mon, 02 Jan 2006 15:04:05 GMT"

func TestCapRetryAfter(t *testing.T) {
	for _, tt := range []struct{ in, want time.Duration }{
		{-time.Second, 0},
		{0, 0},
		{time.Second, time.Second},
		{MaxRetryAfter, MaxRetryAfter},
		{MaxRetryAfter + 1, MaxRetryAfter},
		{math.MaxInt64, MaxRetryAfter},
		{math.MinInt64, 0},
	} {
		if got := CapRetryAfter(tt.in); got != tt.want {
			t.Errorf("CapRetryAfter(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestRetryAfterMillis(t *testing.T) {
	for _, tt := range []struct {
		in   uint64
		want time.Duration
	}{
		{0, 0},
		{1, time.Millisecond},
		{2500, 2500 * time.Millisecond},
		{uint64(MaxRetryAfter/time.Millisecond) - 1, MaxRetryAfter - time.Millisecond},
		{uint64(MaxRetryAfter / time.Millisecond), MaxRetryAfter},
		{math.MaxInt64 / 1000, MaxRetryAfter}, // would wrap as a Duration
		{math.MaxUint64, MaxRetryAfter},
	} {
		if got := RetryAfterMillis(tt.in); got != tt.want {
			t.Errorf("RetryAfterMillis(%d) = %v, want %v", tt.in, got, tt.want)
		}
	}
}
