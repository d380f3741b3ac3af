package retry

import (
	"math"
	"time"
)

// Backoff returns the wait after the n-th consecutive failure of an attempt (n >= 1):
// InitialBackoff * 2^(n-1), capped at MaxBackoff. With the defaults: 100ms, 200ms, 400ms, 800ms, 1.6s,
// 3.2s, then 5s. It never overflows, however large n is; an n below 1 is taken as 1, so that no retry is
// ever made without a delay. MaxBackoff is a hard cap, even below InitialBackoff (which
// [Policy.Validate] reports); a negative duration is taken as 0.
func (p Policy) Backoff(failures int) time.Duration {
	return doubling(p.InitialBackoff, p.MaxBackoff, failures)
}

// BackpressureDelay returns the wait after the n-th consecutive backpressure failure: [Policy.Backoff]
// plus jitter, and never less than retryAfter (the Retry-After of a 429, or the floor the guest asked for).
// jitter is a random number in [0,1) supplied by the caller; it adds up to 50% of the backoff (jitter 0.5
// adds 25%), so that the aggregates of a partition that backed off together do not come back together. The
// jitter applies on top of MaxBackoff, so a capped wait lies in [MaxBackoff, 1.5*MaxBackoff). A jitter
// outside [0,1) (or NaN) is clamped into it. retryAfter is honoured as a floor without a cap of its own
// ([Classify] bounds a Decision's RetryAfter by [MaxRetryAfter]); the caller bounds the total with
// [Policy.BackpressureAttempts].
func (p Policy) BackpressureDelay(failures int, retryAfter time.Duration, jitter float64) time.Duration {
	base := p.Backoff(failures)
	switch {
	case jitter != jitter || jitter < 0: // NaN or negative
		jitter = 0
	case jitter >= 1:
		jitter = math.Nextafter(1, 0)
	}
	extra := time.Duration(float64(base) * jitter / 2) // at most MaxInt64/2: no conversion overflow
	d := base
	if d > math.MaxInt64-extra {
		d = math.MaxInt64
	} else {
		d += extra
	}
	return max(d, retryAfter)
}

// doubling returns first*2^(n-1) capped at limit, for n >= 1 (smaller n count as 1), without overflow.
// Negative inputs count as 0.
func doubling(first, limit time.Duration, n int) time.Duration {
	first, limit = max(first, 0), max(limit, 0)
	if n < 1 {
		n = 1
	}
	if first == 0 {
		return 0
	}
	shift := n - 1
	if shift >= 63 || first > limit>>shift {
		return limit
	}
	return first << shift
}
