package retry

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestClassString(t *testing.T) {
	for _, c := range []Class{Recoverable, Unrecoverable, Systemic, Backpressure} {
		got, err := ParseClass(c.String())
		if err != nil || got != c {
			t.Errorf("ParseClass(%q) = %v, %v", c.String(), got, err)
		}
		b, err := c.MarshalText()
		var back Class
		if err != nil || back.UnmarshalText(b) != nil || back != c {
			t.Errorf("text round trip of %v: %q, %v, %v", c, b, err, back)
		}
	}
	if got, err := ParseClass(" Unrecoverable "); err != nil || got != Unrecoverable {
		t.Errorf("ParseClass is case- or space-sensitive: %v, %v", got, err)
	}
	if _, err := ParseClass("fatal"); err == nil || !strings.Contains(err.Error(), `"fatal"`) {
		t.Errorf("ParseClass(fatal) = %v", err)
	}
	if Class(9).String() != "Class(9)" {
		t.Errorf("Class(9).String() = %q", Class(9).String())
	}
	if _, err := Class(9).MarshalText(); err == nil {
		t.Error("MarshalText of Class(9): no error")
	}
	var c Class = Systemic
	if err := c.UnmarshalText([]byte("nope")); err == nil || c != Systemic {
		t.Errorf("UnmarshalText(nope) = %v, left %v", err, c)
	}
	if OriginClassifier.String() != "classifier" || Origin(42).String() != "Origin(42)" {
		t.Error("Origin.String")
	}
}

func TestFailureError(t *testing.T) {
	tests := []struct {
		f    *Failure
		want string
	}{
		{nil, "<nil failure>"},
		{&Failure{}, "handler failed"},
		{&Failure{Classes: []string{"UnknownBuyer", "Notification"}, Message: "buyer 7 unknown", Code: "E42"}, "UnknownBuyer: buyer 7 unknown [E42]"},
		{&Failure{Message: "boom"}, "boom"},
		{&Failure{Classes: []string{ClassTimeout}}, "berth.Timeout"},
		{&Failure{Code: "X"}, "[X]"},
	}
	for _, tt := range tests {
		if got := tt.f.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}

func TestNewClassifier(t *testing.T) {
	tests := []struct {
		rules []Rule
		want  string
	}{
		{nil, ""},
		{[]Rule{{ClassTimeout, "unrecoverable"}, {"Busy", "Backpressure"}}, ""},
		{[]Rule{{"A", "recoverable"}, {"", "systemic"}}, `classifier rule 2: class = ""`},
		{[]Rule{{"A ", "recoverable"}}, `classifier rule 1: class = "A "`},
		{[]Rule{{"A", "fatal"}}, `classifier rule 1 (class "A"): as = "fatal"`},
		{[]Rule{{"A", "systemic"}, {"B", "systemic"}, {"A", "recoverable"}}, `classifier rule 3: class = "A": already classified by rule 1`},
		{[]Rule{{ClassCanceled, "unrecoverable"}, {ClassWaitTimeout, "recoverable"}}, ""},
		{[]Rule{{"A", "systemic"}, {"berth.Timout", "unrecoverable"}}, `classifier rule 2: class = "berth.Timout": no builtin class has that name`},
	}
	for _, tt := range tests {
		c, err := NewClassifier(tt.rules)
		if tt.want == "" {
			if err != nil || c == nil {
				t.Errorf("NewClassifier(%v) = %v, %v", tt.rules, c, err)
			}
			continue
		}
		if err == nil || c != nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("NewClassifier(%v) = %v, %v; want error %q", tt.rules, c, err, tt.want)
		}
	}
}

func TestClassify(t *testing.T) {
	handler := Resolve(Layer{SourceHandler, Settings{
		Unrecoverable: []string{"UnknownBuyer", "Both", "Validation"},
		Recoverable:   []string{"Both", "RetryableValidation", "StoreDown"},
	}})
	app, err := NewClassifier([]Rule{
		{ClassTimeout, "unrecoverable"},
		{"Busy", "backpressure"},
		{"Base", "systemic"},
		{"StoreDown", "systemic"},
		{"Derived", "recoverable"},
		{ClassConnectionRefused, "recoverable"},
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		f      *Failure
		p      *Policy
		app    *Classifier
		class  Class
		reason string
		by     Origin
		after  time.Duration
	}{
		{"nil failure", nil, &handler, app, Recoverable, "default", OriginDefault, 0},
		{"plain error", &Failure{Message: "boom"}, &handler, app, Recoverable, "default", OriginDefault, 0},
		{"nil policy and classifier", &Failure{Classes: []string{"UnknownBuyer"}}, nil, nil, Recoverable, "default", OriginDefault, 0},
		{"handler unrecoverable", &Failure{Classes: []string{"UnknownBuyer"}}, &handler, app, Unrecoverable, "handler unrecoverable: UnknownBuyer", OriginHandler, 0},
		{"handler unrecoverable via an ancestor", &Failure{Classes: []string{"UnknownBuyerV2", "UnknownBuyer"}}, &handler, app, Unrecoverable, "handler unrecoverable: UnknownBuyer", OriginHandler, 0},
		{"nearer recoverable beats farther unrecoverable", &Failure{Classes: []string{"RetryableValidation", "Validation"}}, &handler, app, Recoverable, "handler recoverable: RetryableValidation", OriginHandler, 0},
		{"nearer unrecoverable beats farther recoverable", &Failure{Classes: []string{"Validation", "RetryableValidation"}}, &handler, app, Unrecoverable, "handler unrecoverable: Validation", OriginHandler, 0},
		{"same class in both lists: unrecoverable", &Failure{Classes: []string{"Both"}}, &handler, app, Unrecoverable, "handler unrecoverable: Both", OriginHandler, 0},
		{"handler beats guest report", &Failure{Classes: []string{"UnknownBuyer"}, Reported: ReportedBackpressure}, &handler, app, Unrecoverable, "handler unrecoverable: UnknownBuyer", OriginHandler, 0},
		{"handler recoverable beats a systemic rule", &Failure{Classes: []string{"StoreDown"}}, &handler, app, Recoverable, "handler recoverable: StoreDown", OriginHandler, 0},
		{"guest systemic", &Failure{Classes: []string{"Derived"}, Reported: ReportedSystemic}, &handler, app, Systemic, "guest reported systemic", OriginGuest, 0},
		{"guest backpressure carries retry-after", &Failure{Reported: ReportedBackpressure, RetryAfter: 3 * time.Second}, &handler, app, Backpressure, "guest reported backpressure", OriginGuest, 3 * time.Second},
		{"guest beats classifier", &Failure{Classes: []string{ClassTimeout}, Reported: ReportedSystemic}, &handler, app, Systemic, "guest reported systemic", OriginGuest, 0},
		{"classifier rule", &Failure{Classes: []string{ClassTimeout}}, &handler, app, Unrecoverable, "classifier rule 1: berth.Timeout", OriginClassifier, 0},
		{"classifier nearest first", &Failure{Classes: []string{"Derived", "Base"}}, &handler, app, Recoverable, "classifier rule 5: Derived", OriginClassifier, 0},
		{"classifier via ancestor", &Failure{Classes: []string{"Other", "Base"}}, &handler, app, Systemic, "classifier rule 3: Base", OriginClassifier, 0},
		{"classifier backpressure carries retry-after", &Failure{Classes: []string{"Busy"}, RetryAfter: time.Second}, &handler, app, Backpressure, "classifier rule 2: Busy", OriginClassifier, time.Second},
		{"classifier beats builtin", &Failure{Classes: []string{ClassConnectionRefused}}, &handler, app, Recoverable, "classifier rule 6: berth.ConnectionRefused", OriginClassifier, 0},
		{"builtin connection refused", &Failure{Classes: []string{ClassConnectionRefused}}, nil, nil, Systemic, "builtin: berth.ConnectionRefused", OriginBuiltin, 0},
		{"builtin connection refused beats 429", &Failure{Classes: []string{ClassConnectionRefused}, HTTP429: true}, nil, nil, Systemic, "builtin: berth.ConnectionRefused", OriginBuiltin, 0},
		{"429", &Failure{Message: "x", HTTP429: true, RetryAfter: 7 * time.Second}, nil, nil, Backpressure, "outbound HTTP 429", OriginBuiltin, 7 * time.Second},
		{"429 beats builtin timeout", &Failure{Classes: []string{ClassTimeout}, HTTP429: true}, nil, nil, Backpressure, "outbound HTTP 429", OriginBuiltin, 0},
		{"429 negative retry-after", &Failure{HTTP429: true, RetryAfter: -time.Second}, nil, nil, Backpressure, "outbound HTTP 429", OriginBuiltin, 0},
		{"429 retry-after capped", &Failure{HTTP429: true, RetryAfter: 48 * time.Hour}, nil, nil, Backpressure, "outbound HTTP 429", OriginBuiltin, MaxRetryAfter},
		{"guest retry-after capped", &Failure{Reported: ReportedBackpressure, RetryAfter: math.MaxInt64}, nil, nil, Backpressure, "guest reported backpressure", OriginGuest, MaxRetryAfter},
		{"builtin timeout", &Failure{Classes: []string{ClassTimeout}}, nil, nil, Recoverable, "builtin: berth.Timeout", OriginBuiltin, 0},
		{"builtin trap", &Failure{Classes: []string{ClassTrap}}, nil, app, Recoverable, "builtin: berth.Trap", OriginBuiltin, 0},
		{"builtin memory", &Failure{Classes: []string{ClassMemoryExceeded}}, nil, nil, Recoverable, "builtin: berth.MemoryExceeded", OriginBuiltin, 0},
		{"builtin panic", &Failure{Classes: []string{ClassPanic}}, nil, nil, Recoverable, "builtin: berth.Panic", OriginBuiltin, 0},
		{"recoverable drops retry-after", &Failure{Message: "x", RetryAfter: time.Second}, nil, nil, Recoverable, "default", OriginDefault, 0},
	}
	for _, tt := range tests {
		got := Classify(tt.f, tt.p, tt.app)
		want := Decision{Class: tt.class, RetryAfter: tt.after, Reason: tt.reason, By: tt.by}
		chain := got.Chain
		if got.Class != want.Class || got.RetryAfter != want.RetryAfter || got.Reason != want.Reason || got.By != want.By || got.Undeclared != nil {
			t.Errorf("%s: Classify = %+v, want %+v", tt.name, got, want)
		}
		if tt.f != nil && !slices.Equal(chain, tt.f.Classes) {
			t.Errorf("%s: Chain %q without a tree, want the chain as sent %q", tt.name, chain, tt.f.Classes)
		}
	}
}

func TestCountsTowardOutage(t *testing.T) {
	tests := []struct {
		d    Decision
		want bool
	}{
		{Decision{Class: Recoverable, By: OriginDefault}, true},
		{Decision{Class: Recoverable, By: OriginBuiltin}, true},
		{Decision{Class: Recoverable, By: OriginHandler}, false},
		{Decision{Class: Recoverable, By: OriginClassifier}, false},
		{Decision{Class: Unrecoverable, By: OriginHandler}, false},
		{Decision{Class: Systemic, By: OriginBuiltin}, false},
		{Decision{Class: Backpressure, By: OriginBuiltin}, false},
	}
	for _, tt := range tests {
		if got := tt.d.CountsTowardOutage(); got != tt.want {
			t.Errorf("%+v.CountsTowardOutage() = %v, want %v", tt.d, got, tt.want)
		}
	}
}
