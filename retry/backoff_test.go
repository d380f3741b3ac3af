package retry

import (
	"math"
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	def := Resolve()
	spec := Resolve(Layer{SourceProcessor, Settings{InitialBackoff: time.Second, MaxBackoff: 30 * time.Second}})
	huge := Policy{InitialBackoff: time.Duration(math.MaxInt64 / 2), MaxBackoff: math.MaxInt64}
	tests := []struct {
		name     string
		p        Policy
		failures int
		want     time.Duration
	}{
		{"default 1", def, 1, 100 * time.Millisecond},
		{"default 2", def, 2, 200 * time.Millisecond},
		{"default 3", def, 3, 400 * time.Millisecond},
		{"default 4", def, 4, 800 * time.Millisecond},
		{"default 5", def, 5, 1600 * time.Millisecond},
		{"default 6", def, 6, 3200 * time.Millisecond},
		{"default 7 capped", def, 7, 5 * time.Second},
		{"default huge n", def, math.MaxInt, 5 * time.Second},
		{"n 0 taken as 1", def, 0, 100 * time.Millisecond},
		{"negative n taken as 1", def, -5, 100 * time.Millisecond},
		{"spec 1", spec, 1, time.Second},
		{"spec 5", spec, 5, 16 * time.Second},
		{"spec 6 capped", spec, 6, 30 * time.Second},
		{"shift 62", spec, 63, 30 * time.Second},
		{"shift 63", spec, 64, 30 * time.Second},
		{"no overflow near MaxInt64", huge, 2, math.MaxInt64 - 1},
		{"no overflow past MaxInt64", huge, 3, math.MaxInt64},
		{"max below initial is a hard cap", Policy{InitialBackoff: 10 * time.Second, MaxBackoff: 5 * time.Second}, 1, 5 * time.Second},
		{"negative initial", Policy{InitialBackoff: -1, MaxBackoff: time.Second}, 3, 0},
		{"negative max", Policy{InitialBackoff: time.Second, MaxBackoff: -1}, 3, 0},
	}
	for _, tt := range tests {
		if got := tt.p.Backoff(tt.failures); got != tt.want {
			t.Errorf("%s: Backoff(%d) = %v, want %v", tt.name, tt.failures, got, tt.want)
		}
	}
}

func TestBackpressureDelay(t *testing.T) {
	def := Resolve()
	huge := Policy{InitialBackoff: math.MaxInt64, MaxBackoff: math.MaxInt64}
	tests := []struct {
		name       string
		p          Policy
		failures   int
		retryAfter time.Duration
		jitter     float64
		want       time.Duration
	}{
		{"no jitter", def, 1, 0, 0, 100 * time.Millisecond},
		{"half jitter adds 25%", def, 1, 0, 0.5, 125 * time.Millisecond},
		{"jitter near 1 adds almost 50%", def, 3, 0, 0.999, 400*time.Millisecond + 199800*time.Microsecond},
		{"jitter on top of the cap", def, 20, 0, 0.5, 6250 * time.Millisecond},
		{"retry-after is a floor", def, 1, 2 * time.Second, 0.5, 2 * time.Second},
		{"retry-after below the backoff", def, 4, 100 * time.Millisecond, 0, 800 * time.Millisecond},
		{"negative retry-after", def, 1, -time.Second, 0, 100 * time.Millisecond},
		{"jitter clamped below", def, 1, 0, -3, 100 * time.Millisecond},
		{"NaN jitter", def, 1, 0, math.NaN(), 100 * time.Millisecond},
		{"jitter clamped above", def, 2, 0, 7, 300*time.Millisecond - 1},
		{"no overflow", huge, 1, 0, 0.9, math.MaxInt64},
	}
	for _, tt := range tests {
		if got := tt.p.BackpressureDelay(tt.failures, tt.retryAfter, tt.jitter); got != tt.want {
			t.Errorf("%s: BackpressureDelay(%d, %v, %v) = %v, want %v", tt.name, tt.failures, tt.retryAfter, tt.jitter, got, tt.want)
		}
	}
}
