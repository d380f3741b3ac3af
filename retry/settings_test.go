package retry

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestDefaults(t *testing.T) {
	d := Defaults()
	want := Settings{MaxAttempts: 5, InitialBackoff: 100 * time.Millisecond, MaxBackoff: 5 * time.Second,
		Timeout: 30 * time.Second, BackpressureAttempts: 20}
	if fmt.Sprint(d) != fmt.Sprint(want) {
		t.Fatalf("Defaults() = %+v, want %+v", d, want)
	}
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := Resolve().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestResolve(t *testing.T) {
	processor := Layer{SourceProcessor, Settings{MaxAttempts: 5, InitialBackoff: time.Second,
		MaxBackoff: 30 * time.Second, Timeout: 10 * time.Second, Unrecoverable: []string{"UnknownBuyer"}}}
	tests := []struct {
		name    string
		layers  []Layer
		want    Settings
		sources map[string]Source
	}{
		{
			name: "defaults only",
			want: Defaults(),
		},
		{
			name:   "processor",
			layers: []Layer{processor},
			want: Settings{MaxAttempts: 5, InitialBackoff: time.Second, MaxBackoff: 30 * time.Second,
				Timeout: 10 * time.Second, Unrecoverable: []string{"UnknownBuyer"}, BackpressureAttempts: 20},
			sources: map[string]Source{KeyMaxAttempts: SourceProcessor, KeyInitialBackoff: SourceProcessor,
				KeyMaxBackoff: SourceProcessor, KeyTimeout: SourceProcessor, KeyUnrecoverable: SourceProcessor},
		},
		{
			name: "handler and override setting by setting",
			layers: []Layer{
				{SourceProcessor, Settings{MaxAttempts: 5}},
				processor,
				{SourceHandler, Settings{Recoverable: []string{"Busy"}, BackpressureAttempts: 3}},
				{SourceOverride, Settings{MaxAttempts: 8, Timeout: 20 * time.Second}},
			},
			want: Settings{MaxAttempts: 8, InitialBackoff: time.Second, MaxBackoff: 30 * time.Second,
				Timeout: 20 * time.Second, Unrecoverable: []string{"UnknownBuyer"}, Recoverable: []string{"Busy"},
				BackpressureAttempts: 3},
			sources: map[string]Source{KeyMaxAttempts: SourceOverride, KeyInitialBackoff: SourceProcessor,
				KeyMaxBackoff: SourceProcessor, KeyTimeout: SourceOverride, KeyUnrecoverable: SourceProcessor,
				KeyRecoverable: SourceHandler, KeyBackpressureAttempts: SourceHandler},
		},
		{
			name: "an empty non-nil list clears, a nil one inherits",
			layers: []Layer{processor,
				{SourceHandler, Settings{Unrecoverable: []string{}}},
				{SourceOverride, Settings{Recoverable: nil}}},
			want: Settings{MaxAttempts: 5, InitialBackoff: time.Second, MaxBackoff: 30 * time.Second,
				Timeout: 10 * time.Second, Unrecoverable: []string{}, BackpressureAttempts: 20},
			sources: map[string]Source{KeyMaxAttempts: SourceProcessor, KeyInitialBackoff: SourceProcessor,
				KeyMaxBackoff: SourceProcessor, KeyTimeout: SourceProcessor, KeyUnrecoverable: SourceHandler},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Resolve(tt.layers...)
			if got := p.Settings(); fmt.Sprintf("%#v", got) != fmt.Sprintf("%#v", tt.want) {
				t.Errorf("Resolve = %#v\nwant      %#v", got, tt.want)
			}
			for _, k := range []string{KeyMaxAttempts, KeyInitialBackoff, KeyMaxBackoff, KeyTimeout,
				KeyUnrecoverable, KeyRecoverable, KeyBackpressureAttempts} {
				want := tt.sources[k]
				if want == "" {
					want = SourceDefault
				}
				if got, ok := p.Sources[k]; !ok || got != want {
					t.Errorf("Sources[%q] = %q, want %q", k, got, want)
				}
			}
			if len(p.Sources) != 7 {
				t.Errorf("Sources has %d keys, want 7", len(p.Sources))
			}
		})
	}
}

func TestResolveDoesNotAlias(t *testing.T) {
	list := []string{"A", "B"}
	p := Resolve(Layer{SourceHandler, Settings{Unrecoverable: list}})
	p.Unrecoverable[0] = "X"
	if list[0] != "A" {
		t.Fatal("Resolve's policy aliases the layer's list")
	}
	q := Resolve()
	q.Sources[KeyTimeout] = SourceOverride
	if Resolve().Sources[KeyTimeout] != SourceDefault {
		t.Fatal("Resolve shares its Sources map")
	}
}

func TestSettingsValidate(t *testing.T) {
	tests := []struct {
		name  string
		s     Settings
		wants []string // substrings of the error, all of them; none means valid
	}{
		{"zero inherits everything", Settings{}, nil},
		{"spec example", Settings{MaxAttempts: 5, InitialBackoff: time.Second, MaxBackoff: 30 * time.Second,
			Timeout: 10 * time.Second, Unrecoverable: []string{"UnknownBuyer"}}, nil},
		{"same class in both lists is fine", Settings{Unrecoverable: []string{"A"}, Recoverable: []string{"A"}}, nil},
		{"equal backoffs", Settings{InitialBackoff: time.Second, MaxBackoff: time.Second}, nil},
		{"max-attempts", Settings{MaxAttempts: -1}, []string{`max-attempts = -1`}},
		{"initial-backoff", Settings{InitialBackoff: -time.Second}, []string{`initial-backoff = "-1s"`, "negative"}},
		{"max-backoff", Settings{MaxBackoff: -time.Millisecond}, []string{`max-backoff = "-1ms"`}},
		{"timeout", Settings{Timeout: -1}, []string{`timeout = "-1ns"`}},
		{"backpressure-attempts", Settings{BackpressureAttempts: -2}, []string{`backpressure-attempts = -2`}},
		{"max below initial", Settings{InitialBackoff: 2 * time.Second, MaxBackoff: time.Second},
			[]string{`max-backoff = "1s": is less than initial-backoff = "2s"`}},
		{"empty class", Settings{Unrecoverable: []string{"A", ""}}, []string{`unrecoverable[1] = ""`}},
		{"padded class", Settings{Recoverable: []string{" A"}}, []string{`recoverable[0] = " A"`}},
		{"twice", Settings{Recoverable: []string{"A", "B", "A"}}, []string{`recoverable[2] = "A": listed twice (also at recoverable[0])`}},
		{"all reported", Settings{MaxAttempts: -1, Timeout: -1, BackpressureAttempts: -1},
			[]string{KeyMaxAttempts, KeyTimeout, KeyBackpressureAttempts}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.s.Validate()
			if len(tt.wants) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want %q", tt.wants)
			}
			var se *SettingError
			if !errors.As(err, &se) {
				t.Errorf("Validate() = %v, not a *SettingError", err)
			}
			for _, w := range tt.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestPolicyValidate(t *testing.T) {
	p := Resolve(Layer{SourceHandler, Settings{InitialBackoff: 10 * time.Second}})
	err := p.Validate()
	want := `max-backoff = "5s": (from default) is less than initial-backoff = "10s" (from handler)`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Validate() = %v, want %q", err, want)
	}
	if err := (Policy{}).Validate(); err == nil || !strings.Contains(err.Error(), "max-attempts = 0") ||
		!strings.Contains(err.Error(), `timeout = "0s"`) {
		t.Fatalf("Validate() of the zero policy = %v", err)
	}
	bad := Resolve(Layer{SourceOverride, Settings{MaxAttempts: -3}})
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "max-attempts = -3") {
		t.Fatalf("Validate() = %v", err)
	}
}

func TestConfigSettings(t *testing.T) {
	var c Config
	c.MaxAttempts = 8
	if err := c.Timeout.UnmarshalText([]byte("PT20S")); err != nil {
		t.Fatal(err)
	}
	if err := c.InitialBackoff.UnmarshalText([]byte("1m 30s")); err != nil {
		t.Fatal(err)
	}
	c.Unrecoverable = []string{"X"}
	s := c.Settings()
	if s.MaxAttempts != 8 || s.Timeout != 20*time.Second || s.InitialBackoff != 90*time.Second ||
		!slices.Equal(s.Unrecoverable, []string{"X"}) || s.MaxBackoff != 0 {
		t.Fatalf("Settings() = %+v", s)
	}
}

// FuzzResolve layers two fuzzed layers over the defaults: no panic; every validation error names the
// setting and the value; a valid pair resolves setting by setting and backs off within bounds.
func FuzzResolve(f *testing.F) {
	f.Add(5, int64(time.Second), int64(30*time.Second), int64(10*time.Second), "UnknownBuyer", "", 0,
		8, int64(0), int64(0), int64(20*time.Second), "", "Busy", 3)
	f.Add(0, int64(0), int64(0), int64(0), "", "", 0, 0, int64(0), int64(0), int64(0), "", "", 0)
	f.Add(-1, int64(-1), int64(-5), int64(-9), "A,,A", " B", -4, 1, int64(1), int64(1<<62), int64(1), "A", "A", 1)
	f.Add(1, int64(10*time.Second), int64(time.Second), int64(1), "x", "x", 1, 0, int64(0), int64(0), int64(0), "-", "-", 0)
	f.Fuzz(func(t *testing.T, ma1 int, ib1, mb1, to1 int64, u1, r1 string, bp1 int,
		ma2 int, ib2, mb2, to2 int64, u2, r2 string, bp2 int) {
		list := func(s string) []string {
			switch s {
			case "":
				return nil
			case "-":
				return []string{}
			}
			return strings.Split(s, ",")
		}
		layers := []Layer{
			{SourceProcessor, Settings{ma1, time.Duration(ib1), time.Duration(mb1), time.Duration(to1), list(u1), list(r1), bp1}},
			{SourceHandler, Settings{ma2, time.Duration(ib2), time.Duration(mb2), time.Duration(to2), list(u2), list(r2), bp2}},
		}
		valid := true
		for _, l := range layers {
			err := l.Settings.Validate()
			if err == nil {
				continue
			}
			valid = false
			checkSettingErrors(t, err)
		}
		p := Resolve(layers...)
		perr := p.Validate()
		if perr != nil {
			checkSettingErrors(t, perr)
		}
		// Setting by setting: the last non-zero layer wins.
		want := Defaults()
		for _, l := range layers {
			s := l.Settings
			if s.MaxAttempts != 0 {
				want.MaxAttempts = s.MaxAttempts
			}
			if s.InitialBackoff != 0 {
				want.InitialBackoff = s.InitialBackoff
			}
			if s.MaxBackoff != 0 {
				want.MaxBackoff = s.MaxBackoff
			}
			if s.Unrecoverable != nil {
				want.Unrecoverable = s.Unrecoverable
			}
		}
		if p.MaxAttempts != want.MaxAttempts || p.InitialBackoff != want.InitialBackoff ||
			p.MaxBackoff != want.MaxBackoff || !slices.Equal(p.Unrecoverable, want.Unrecoverable) ||
			(p.Unrecoverable == nil) != (want.Unrecoverable == nil) {
			t.Fatalf("Resolve = %+v, want %+v", p, want)
		}
		if !valid || perr != nil {
			return
		}
		if p.MaxAttempts < 1 || p.BackpressureAttempts < 1 || p.Timeout <= 0 {
			t.Fatalf("valid policy with unusable values: %+v", p)
		}
		prev := time.Duration(0)
		for _, n := range []int{1, 2, 3, 10, 62, 63, 64, 1000, 1 << 40} {
			b := p.Backoff(n)
			if b < prev || b > p.MaxBackoff || b <= 0 {
				t.Fatalf("Backoff(%d) = %v after %v, policy %+v", n, b, prev, p)
			}
			prev = b
			j := p.BackpressureDelay(n, 0, 0.999)
			if j < b || j-b > b/2 {
				t.Fatalf("BackpressureDelay(%d) = %v for backoff %v", n, j, b)
			}
		}
	})
}

// checkSettingErrors checks that every error joined in err is a *SettingError whose message names the
// setting and the value.
func checkSettingErrors(t *testing.T, err error) {
	t.Helper()
	var errs []error
	var walk func(error)
	walk = func(e error) {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, x := range j.Unwrap() {
				walk(x)
			}
			return
		}
		errs = append(errs, e)
	}
	walk(err)
	for _, e := range errs {
		se, ok := e.(*SettingError)
		if !ok {
			t.Fatalf("error %v (%T) is not a *SettingError", e, e)
		}
		if se.Setting == "" || se.Value == "" || !strings.Contains(e.Error(), se.Setting+" = "+se.Value) {
			t.Fatalf("error %q does not name the setting and value", e)
		}
	}
}
