package retry

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// The TOML keys of the systemic-failure window ([subscription.systemic]).
const (
	KeySystemicAggregates = "aggregates"
	KeySystemicWindow     = "window"
)

// Default systemic-failure window, as returned by [DefaultSystemicWindow]: 3 aggregates within 10s.
const (
	DefaultSystemicAggregates   = 3
	DefaultSystemicWindowLength = 10 * time.Second
)

// SystemicWindow says when failures of a partition are taken for an outage: when Aggregates distinct
// aggregates fail within Window. A zero field takes its default.
type SystemicWindow struct {
	// Aggregates is the number of distinct failing aggregates that make an outage (default 3, at least 2).
	Aggregates int
	// Window is how recent their failures must be (default 10s).
	Window time.Duration
}

// DefaultSystemicWindow returns 3 aggregates within 10 seconds, the default outage rule
// (docs/failure-model.md, section 3).
func DefaultSystemicWindow() SystemicWindow {
	return SystemicWindow{Aggregates: DefaultSystemicAggregates, Window: DefaultSystemicWindowLength}
}

// Validate reports unusable fields, joined, each a [*SettingError] naming the TOML key and the value: a
// negative Aggregates or 1 (which would take every failure for an outage), a negative Window. Zero
// fields are valid (they take the defaults).
func (w SystemicWindow) Validate() error {
	var errs []error
	if w.Aggregates < 0 || w.Aggregates == 1 {
		errs = append(errs, settingErr(KeySystemicAggregates, fmt.Sprint(w.Aggregates),
			"must be at least 2 (0 takes the default %d)", DefaultSystemicAggregates))
	}
	errs = appendDurationErrs(errs, KeySystemicWindow, w.Window)
	return errors.Join(errs...)
}

// Detector detects a partition-wide outage from the failures of the partition's aggregates: it reports
// systemic when at least Aggregates distinct aggregates have failed within the last Window, counting each
// aggregate's latest failure, and forgetting an aggregate once it succeeds.
//
// Feed it only failures for which [Decision.CountsTowardOutage] holds. Time is what the caller passes in;
// it never goes backwards for the Detector (an earlier now is taken as the latest seen so far). A Detector
// is safe for concurrent use (it holds a mutex; do not copy it). Its memory is bounded by the failures
// within one window. The zero Detector uses [DefaultSystemicWindow].
type Detector struct {
	mu        sync.Mutex
	threshold int
	window    time.Duration
	latest    time.Time            // the latest now seen
	failed    map[string]time.Time // aggregate -> its latest failure within the window
	queue     []failureAt          // failures in time order; stale entries are skipped when pruned
}

type failureAt struct {
	aggregate string
	at        time.Time
}

// NewDetector returns a Detector for the window; a field that is zero or negative takes its default
// (see [SystemicWindow.Validate] to reject it instead). Aggregates 1 is honoured: every failure is then
// systemic.
func NewDetector(w SystemicWindow) *Detector {
	if w.Aggregates <= 0 {
		w.Aggregates = DefaultSystemicAggregates
	}
	if w.Window <= 0 {
		w.Window = DefaultSystemicWindowLength
	}
	return &Detector{threshold: w.Aggregates, window: w.Window, failed: map[string]time.Time{}}
}

// Failure records a failure of aggregate at now and reports whether the partition is now taken to be
// down: whether at least Aggregates distinct aggregates (this one included) failed within the Window
// ending at now, i.e. at a time t with now-t < Window.
func (d *Detector) Failure(aggregate string, now time.Time) (systemic bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	now = d.advance(now)
	d.failed[aggregate] = now
	d.queue = append(d.queue, failureAt{aggregate, now})
	return len(d.failed) >= d.threshold
}

// Success forgets aggregate's failures: it no longer counts toward an outage.
func (d *Detector) Success(aggregate string, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.advance(now)
	delete(d.failed, aggregate)
}

// Failing returns how many distinct aggregates have failed within the window ending at now.
func (d *Detector) Failing(now time.Time) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.advance(now)
	return len(d.failed)
}

// Reset forgets every failure, e.g. when the partition has paused and come back.
func (d *Detector) Reset() {
	d.mu.Lock()
	defer d.mu.Unlock()
	clear(d.failed)
	d.queue = nil
}

// advance moves the clock to now (never backwards), drops the failures that left the window and returns
// the effective now.
func (d *Detector) advance(now time.Time) time.Time {
	if d.failed == nil { // the zero Detector
		w := DefaultSystemicWindow()
		d.threshold, d.window, d.failed = w.Aggregates, w.Window, map[string]time.Time{}
	}
	if now.Before(d.latest) {
		now = d.latest
	}
	d.latest = now
	i := 0
	for ; i < len(d.queue) && now.Sub(d.queue[i].at) >= d.window; i++ {
		e := d.queue[i]
		if t, ok := d.failed[e.aggregate]; ok && t.Equal(e.at) {
			delete(d.failed, e.aggregate)
		}
	}
	if i > 0 {
		// Drop the expired prefix; copy when it is most of the backing array so that it can shrink.
		if i > len(d.queue)/2 {
			d.queue = append([]failureAt(nil), d.queue[i:]...)
		} else {
			d.queue = d.queue[i:]
		}
	}
	return now
}
