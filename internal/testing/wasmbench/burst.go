package wasmbench

import (
	"errors"
	"sync"
	"testing"
	"time"
)

// ReportCPU starts measuring the process's CPU time; the func it returns
// reports it per iteration as cpu-ns/op, which a machine shared with other
// work disturbs less than the wall time of ns/op.
func ReportCPU(b *testing.B) func() {
	start := CPUTime()
	return func() { b.ReportMetric(float64(CPUTime()-start)/float64(b.N), "cpu-ns/op") }
}

// Burst runs n calls split over g goroutines (call(i) for goroutine i) and
// returns the wall time and process CPU time they took.
func Burst(g, n int, call func(i int) error) (wall, cpu time.Duration, err error) {
	errs := make([]error, g)
	var wg sync.WaitGroup
	start, startCPU := time.Now(), CPUTime()
	for i := range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range n / g {
				if errs[i] = call(i); errs[i] != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	return time.Since(start), CPUTime() - startCPU, errors.Join(errs...)
}

// Setting is one way of making a call, for Scaling: call(i) makes one
// call on goroutine i (0 or 1).
type Setting struct {
	Name string
	Call func(i int) error
}

// Totals are a setting's wall and CPU time per call over a benchmark's
// bursts, with one goroutine ([0]) and with two ([1]).
type Totals struct {
	Wall, CPU [2]time.Duration
}

// Scaling is how calls scale from one goroutine to two, for each setting.
// Each iteration of b runs a burst of n calls in each setting with one and
// then two goroutines, so that the ratios it reports come from the same
// moments of a shared machine. Settings[0] is the baseline (plain wazero).
// It reports, per setting:
//
//   - NAME-µs/call, NAME-cpu-µs/call: wall and CPU time per call on one
//     goroutine;
//   - NAME-2v1: calls per second with two goroutines over one;
//   - NAME-cpu-2v1: CPU time per call with two goroutines over one (what
//     sharing costs beyond the work);
//
// and for each other setting NAME/BASE, its 2v1 as a fraction of the
// baseline's. It returns each setting's totals per call, for ratios of the
// caller's.
func Scaling(b *testing.B, n int, settings ...Setting) []Totals {
	tot := make([]Totals, len(settings))
	for b.Loop() {
		for s, st := range settings {
			for g := 1; g <= 2; g++ {
				w, c, err := Burst(g, n, st.Call)
				if err != nil {
					b.Fatalf("%s, %d goroutines: %v", st.Name, g, err)
				}
				tot[s].Wall[g-1] += w
				tot[s].CPU[g-1] += c
			}
		}
	}
	calls := time.Duration(b.N * n)
	for s := range tot {
		for g := range 2 {
			tot[s].Wall[g] /= calls
			tot[s].CPU[g] /= calls
		}
	}
	scale := func(s int) float64 { return float64(tot[s].Wall[0]) / float64(tot[s].Wall[1]) }
	for s, st := range settings {
		b.ReportMetric(float64(tot[s].Wall[0])/1e3, st.Name+"-µs/call")
		b.ReportMetric(float64(tot[s].CPU[0])/1e3, st.Name+"-cpu-µs/call")
		b.ReportMetric(scale(s), st.Name+"-2v1")
		b.ReportMetric(float64(tot[s].CPU[1])/float64(tot[s].CPU[0]), st.Name+"-cpu-2v1")
		if s > 0 {
			b.ReportMetric(scale(s)/scale(0), st.Name+"/"+settings[0].Name)
		}
	}
	return tot
}
