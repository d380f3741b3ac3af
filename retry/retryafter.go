package retry

import (
	"net/http"
	"strings"
	"time"
)

// MaxRetryAfter caps every Retry-After the host honours: a header's ([ParseRetryAfter]), the floor a guest
// asks for with backpressure (retryAfterMillis, see [CapRetryAfter]) and so a [Decision]'s RetryAfter.
// An hour is long enough for any real rate limit, and short enough that a huge or mistaken value cannot
// hold an aggregate (and the partition behind it) or a webhook's delivery for good: after it the call is
// simply tried again, and asked again.
const MaxRetryAfter = time.Hour

// ParseRetryAfter reads an HTTP Retry-After value (RFC 9110, section 10.2.3) as the delay it asks for, at
// now: either delay-seconds (digits only, surrounding space ignored) or an HTTP-date (IMF-fixdate, or the
// obsolete RFC 850 and asctime forms), whose distance from now is the delay. It returns 0 (no floor) for an
// empty, negative, signed or otherwise malformed value and for a date not after now, and at most
// [MaxRetryAfter] for a value larger than that, however many digits it has or however far the date is:
// it never overflows.
func ParseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if digits(v) {
		limit := int64(MaxRetryAfter / time.Second)
		var secs int64
		for i := 0; i < len(v); i++ {
			secs = secs*10 + int64(v[i]-'0')
			if secs >= limit {
				return MaxRetryAfter // the rest can only make it larger
			}
		}
		return time.Duration(secs) * time.Second
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0
	}
	return CapRetryAfter(t.Sub(now)) // Sub saturates instead of overflowing on a far date
}

// CapRetryAfter bounds a requested delay to [0, MaxRetryAfter]: a negative one is no floor.
func CapRetryAfter(d time.Duration) time.Duration { return min(max(d, 0), MaxRetryAfter) }

// RetryAfterMillis is CapRetryAfter of a delay given in milliseconds (the ABI's retryAfterMillis), without
// overflowing on a huge one.
func RetryAfterMillis(ms uint64) time.Duration {
	if ms >= uint64(MaxRetryAfter/time.Millisecond) {
		return MaxRetryAfter
	}
	return time.Duration(ms) * time.Millisecond
}

// digits reports whether s is one or more ASCII digits.
func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
