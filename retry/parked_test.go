package retry

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestParkedDefaultSchedule(t *testing.T) {
	p := DefaultParked()
	if p.MaxRetries != 10 || p.FirstDelay != 3*time.Minute || p.MaxDelay != time.Hour || p.Timeout != 2*time.Minute {
		t.Fatalf("DefaultParked() = %+v", p)
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	delays := []time.Duration{3, 6, 12, 24, 48, 60, 60, 60, 60, 60}
	sinceParked := []time.Duration{3, 9, 21, 45, 93, 153, 213, 273, 333, 393}
	parked := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	last := parked
	for i, want := range delays {
		retry := i + 1
		if got := p.Delay(retry); got != want*time.Minute {
			t.Errorf("Delay(%d) = %v, want %v", retry, got, want*time.Minute)
		}
		at, ok := p.Next(i, last)
		if !ok || at.Sub(parked) != sinceParked[i]*time.Minute {
			t.Errorf("Next(%d) = %v, %v; want %v after the park", i, at, ok, sinceParked[i]*time.Minute)
		}
		last = at
	}
	if at, ok := p.Next(10, last); ok || !at.IsZero() {
		t.Errorf("Next(10) = %v, %v; want spent", at, ok)
	}
}

func TestParkedDelayAndNext(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		p     ParkedSettings
		retry int
		want  time.Duration
	}{
		{"retry 0 taken as 1", DefaultParked(), 0, 3 * time.Minute},
		{"huge retry", DefaultParked(), math.MaxInt, time.Hour},
		{"no cap to speak of", ParkedSettings{FirstDelay: time.Minute, MaxDelay: math.MaxInt64}, 70, math.MaxInt64},
		{"wow-like", ParkedSettings{FirstDelay: 180 * time.Second, MaxDelay: 100 * time.Hour}, 10, 180 * time.Second * 512},
	}
	for _, tt := range tests {
		if got := tt.p.Delay(tt.retry); got != tt.want {
			t.Errorf("%s: Delay(%d) = %v, want %v", tt.name, tt.retry, got, tt.want)
		}
	}
	none := ResolveParked(ParkedSettings{MaxRetries: NoParkedRetries})
	if _, ok := none.Next(0, now); ok {
		t.Error("NoParkedRetries: Next(0) ok")
	}
	if at, ok := DefaultParked().Next(-3, now); !ok || at.Sub(now) != 3*time.Minute {
		t.Errorf("Next(-3) = %v, %v", at, ok)
	}
}

func TestResolveParked(t *testing.T) {
	got := ResolveParked(ParkedSettings{MaxRetries: 3, MaxDelay: 2 * time.Hour}, ParkedSettings{FirstDelay: time.Minute}, ParkedSettings{})
	want := ParkedSettings{MaxRetries: 3, FirstDelay: time.Minute, MaxDelay: 2 * time.Hour, Timeout: 2 * time.Minute, RetryUnrecoverable: SwitchOff}
	if got != want {
		t.Fatalf("ResolveParked = %+v, want %+v", got, want)
	}
	if ResolveParked() != DefaultParked() {
		t.Fatal("ResolveParked() is not DefaultParked()")
	}
}

// An unrecoverable park waits for an operator unless a layer opts in; a later layer can opt out again.
func TestResolveParkedRetryUnrecoverable(t *testing.T) {
	on, off := true, false
	tests := []struct {
		layers []ParkedSettings
		want   bool
	}{
		{nil, false},
		{[]ParkedSettings{{RetryUnrecoverable: SwitchOf(&on)}}, true},
		{[]ParkedSettings{{RetryUnrecoverable: SwitchOn}, {}}, true},
		{[]ParkedSettings{{RetryUnrecoverable: SwitchOn}, {RetryUnrecoverable: SwitchOf(&off)}}, false},
		{[]ParkedSettings{{RetryUnrecoverable: SwitchOf(nil)}}, false},
	}
	for i, tt := range tests {
		if got := ResolveParked(tt.layers...).RetriesUnrecoverable(); got != tt.want {
			t.Errorf("%d: RetriesUnrecoverable = %v, want %v", i, got, tt.want)
		}
	}
	if (ParkedConfig{RetryUnrecoverable: &on}).Parked().RetryUnrecoverable != SwitchOn ||
		(ParkedConfig{}).Parked().RetryUnrecoverable != SwitchInherit {
		t.Error("ParkedConfig.Parked does not carry retry-unrecoverable")
	}
}

func TestParkedValidate(t *testing.T) {
	tests := []struct {
		p    ParkedSettings
		want string
	}{
		{ParkedSettings{}, ""},
		{ParkedSettings{MaxRetries: NoParkedRetries}, ""},
		{ParkedSettings{MaxRetries: -2}, "max-retries = -2"},
		{ParkedSettings{FirstDelay: -time.Minute}, `first-delay = "-1m0s"`},
		{ParkedSettings{MaxDelay: -1}, `max-delay = "-1ns"`},
		{ParkedSettings{Timeout: -time.Second}, `timeout = "-1s"`},
		{ParkedSettings{FirstDelay: time.Hour, MaxDelay: time.Minute}, `max-delay = "1m0s": is less than first-delay = "1h0m0s"`},
		{ResolveParked(ParkedSettings{FirstDelay: 2 * time.Hour}), `max-delay = "1h0m0s": is less than first-delay = "2h0m0s"`},
	}
	for _, tt := range tests {
		err := tt.p.Validate()
		if tt.want == "" {
			if err != nil {
				t.Errorf("%+v: Validate() = %v", tt.p, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: Validate() = %v, want %q", tt.p, err, tt.want)
			continue
		}
		checkSettingErrors(t, err)
	}
}

func TestParkedConfig(t *testing.T) {
	var c ParkedConfig
	c.MaxRetries = 4
	if err := c.FirstDelay.UnmarshalText([]byte("PT5M")); err != nil {
		t.Fatal(err)
	}
	if err := c.MaxDelay.UnmarshalText([]byte("1d")); err != nil {
		t.Fatal(err)
	}
	got := c.Parked()
	if got != (ParkedSettings{MaxRetries: 4, FirstDelay: 5 * time.Minute, MaxDelay: 24 * time.Hour}) {
		t.Fatalf("Parked() = %+v", got)
	}
}
