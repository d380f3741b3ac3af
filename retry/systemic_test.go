package retry

import (
	"strings"
	"sync"
	"testing"
	"time"
)

func TestSystemicWindowValidate(t *testing.T) {
	tests := []struct {
		w    SystemicWindow
		want string
	}{
		{SystemicWindow{}, ""},
		{DefaultSystemicWindow(), ""},
		{SystemicWindow{Aggregates: 2, Window: time.Second}, ""},
		{SystemicWindow{Aggregates: 1}, "aggregates = 1"},
		{SystemicWindow{Aggregates: -1}, "aggregates = -1"},
		{SystemicWindow{Window: -time.Second}, `window = "-1s"`},
	}
	for _, tt := range tests {
		err := tt.w.Validate()
		if tt.want == "" {
			if err != nil {
				t.Errorf("%+v: %v", tt.w, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: Validate() = %v, want %q", tt.w, err, tt.want)
		}
	}
	if w := DefaultSystemicWindow(); w.Aggregates != 3 || w.Window != 10*time.Second {
		t.Errorf("DefaultSystemicWindow() = %+v", w)
	}
}

// step is one call on a Detector at a time offset from t0 (in milliseconds).
type step struct {
	at      int
	op      string // "fail", "ok", "count"
	agg     string
	want    bool // for fail
	wantNum int  // for count
}

func TestDetector(t *testing.T) {
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		w     SystemicWindow
		steps []step
	}{
		{"three distinct within 10s", SystemicWindow{}, []step{
			{at: 0, op: "fail", agg: "a"},
			{at: 1000, op: "fail", agg: "b"},
			{at: 9999, op: "fail", agg: "c", want: true},
			{at: 9999, op: "count", wantNum: 3},
		}},
		{"the same aggregate thrice is no outage", SystemicWindow{}, []step{
			{at: 0, op: "fail", agg: "a"},
			{at: 1, op: "fail", agg: "a"},
			{at: 2, op: "fail", agg: "a"},
			{at: 3, op: "count", wantNum: 1},
		}},
		{"a failure exactly Window old has left", SystemicWindow{}, []step{
			{at: 0, op: "fail", agg: "a"},
			{at: 5000, op: "fail", agg: "b"},
			{at: 10000, op: "fail", agg: "c"},
			{at: 10000, op: "count", wantNum: 2},
		}},
		{"a repeated failure keeps the aggregate in the window", SystemicWindow{}, []step{
			{at: 0, op: "fail", agg: "a"},
			{at: 8000, op: "fail", agg: "a"},
			{at: 12000, op: "fail", agg: "b"},
			{at: 17000, op: "fail", agg: "c", want: true},
			{at: 18000, op: "count", wantNum: 2},
		}},
		{"success forgets", SystemicWindow{}, []step{
			{at: 0, op: "fail", agg: "a"},
			{at: 1, op: "fail", agg: "b"},
			{at: 2, op: "ok", agg: "a"},
			{at: 3, op: "fail", agg: "c"},
			{at: 4, op: "fail", agg: "a", want: true},
		}},
		{"success then failure at the same instant", SystemicWindow{Aggregates: 2, Window: time.Second}, []step{
			{at: 0, op: "fail", agg: "a"},
			{at: 0, op: "ok", agg: "a"},
			{at: 0, op: "fail", agg: "a"},
			{at: 999, op: "fail", agg: "b", want: true},
			{at: 1000, op: "count", wantNum: 1},
			{at: 1999, op: "count", wantNum: 0},
		}},
		{"time going backwards is taken as the latest", SystemicWindow{Aggregates: 2, Window: time.Second}, []step{
			{at: 5000, op: "fail", agg: "a"},
			{at: 0, op: "fail", agg: "b", want: true},
			{at: 5999, op: "count", wantNum: 2},
			{at: 6000, op: "count", wantNum: 0},
		}},
		{"custom threshold", SystemicWindow{Aggregates: 5, Window: time.Minute}, []step{
			{at: 0, op: "fail", agg: "a"},
			{at: 1, op: "fail", agg: "b"},
			{at: 2, op: "fail", agg: "c"},
			{at: 3, op: "fail", agg: "d"},
			{at: 59000, op: "fail", agg: "e", want: true},
			{at: 60000, op: "fail", agg: "f", want: true},
			{at: 60001, op: "fail", agg: "g", want: true},
			{at: 60003, op: "count", wantNum: 3},
		}},
		{"invalid window takes the defaults", SystemicWindow{Aggregates: -1, Window: -1}, []step{
			{at: 0, op: "fail", agg: "a"},
			{at: 1, op: "fail", agg: "b"},
			{at: 9000, op: "fail", agg: "c", want: true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewDetector(tt.w)
			for i, s := range tt.steps {
				now := t0.Add(time.Duration(s.at) * time.Millisecond)
				switch s.op {
				case "fail":
					if got := d.Failure(s.agg, now); got != s.want {
						t.Fatalf("step %d: Failure(%q, +%dms) = %v, want %v", i, s.agg, s.at, got, s.want)
					}
				case "ok":
					d.Success(s.agg, now)
				case "count":
					if got := d.Failing(now); got != s.wantNum {
						t.Fatalf("step %d: Failing(+%dms) = %d, want %d", i, s.at, got, s.wantNum)
					}
				}
			}
		})
	}
}

func TestDetectorZeroValueAndReset(t *testing.T) {
	var d Detector
	t0 := time.Unix(0, 0)
	d.Failure("a", t0)
	d.Failure("b", t0)
	if !d.Failure("c", t0.Add(9*time.Second)) {
		t.Fatal("zero Detector does not use the default window")
	}
	d.Reset()
	if d.Failing(t0.Add(9*time.Second)) != 0 {
		t.Fatal("Reset kept failures")
	}
}

func TestDetectorBoundedMemory(t *testing.T) {
	d := NewDetector(SystemicWindow{Aggregates: 1000000, Window: time.Second})
	t0 := time.Unix(0, 0)
	for i := range 100000 {
		d.Failure(string(rune('a'+i%26)), t0.Add(time.Duration(i)*time.Millisecond))
	}
	if len(d.queue) > 1001 || len(d.failed) > 26 {
		t.Fatalf("queue %d, failed %d: not pruned", len(d.queue), len(d.failed))
	}
}

func TestDetectorConcurrent(t *testing.T) {
	d := NewDetector(DefaultSystemicWindow())
	t0 := time.Unix(0, 0)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				now := t0.Add(time.Duration(i) * time.Millisecond)
				d.Failure(string(rune('a'+g)), now)
				d.Success(string(rune('a'+g)), now)
				d.Failing(now)
			}
		})
	}
	wg.Wait()
	if n := d.Failing(t0.Add(time.Second)); n != 0 {
		t.Fatalf("Failing = %d after every aggregate succeeded", n)
	}
}
