// Package logstorm keeps a storm of one kind of log line from flooding the
// log. A park storm parks tens of thousands of aggregates in minutes, and a
// bulk job resumes as many: one line each would be megabytes that no one
// reads. Per kind, the first Burst lines of each Window are logged as they
// come; the rest are counted, and when the window ends one line says how
// many of that kind were left out, with the last one's attributes.
package logstorm

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/berthhq/berth/internal/clock"
)

// Defaults of a Limiter's zero fields.
const (
	// DefaultBurst is how many lines of a kind a window logs: 20.
	DefaultBurst = 20
	// DefaultWindow is the window of a kind's burst: 10 seconds.
	DefaultWindow = 10 * time.Second
)

// Limiter rate-limits lines by kind (their message). It is safe for
// concurrent use; its zero value is not usable, use New.
type Limiter struct {
	log    *slog.Logger
	clock  clock.Clock
	burst  int
	window time.Duration

	mu    sync.Mutex
	kinds map[string]*kind
}

type kind struct {
	start   time.Time // of the current window
	logged  int       // in it
	dropped int       // in it, after the burst
	level   slog.Level
	last    []any // the last dropped line's attributes
	timer   clock.Timer
}

// New returns a Limiter writing to log on c's time. burst (0: DefaultBurst)
// lines of a kind are logged per window (0: DefaultWindow).
func New(log *slog.Logger, c clock.Clock, burst int, window time.Duration) *Limiter {
	if burst <= 0 {
		burst = DefaultBurst
	}
	if window <= 0 {
		window = DefaultWindow
	}
	return &Limiter{log: log, clock: c, burst: burst, window: window, kinds: map[string]*kind{}}
}

// Log logs msg with args at level, unless its kind (msg) has logged its
// burst in the current window: then it is counted for the window's
// summary.
func (l *Limiter) Log(level slog.Level, msg string, args ...any) {
	if !l.log.Enabled(context.Background(), level) {
		return
	}
	now := l.clock.Now()
	l.mu.Lock()
	k := l.kinds[msg]
	if k == nil {
		k = &kind{start: now}
		l.kinds[msg] = k
	}
	if now.Sub(k.start) >= l.window && k.dropped == 0 {
		k.start, k.logged = now, 0
	}
	if k.logged < l.burst {
		k.logged++
		l.mu.Unlock()
		l.log.Log(context.Background(), level, msg, args...)
		return
	}
	k.dropped++
	k.level, k.last = level, args
	if k.timer == nil {
		k.timer = l.clock.AfterFunc(max(k.start.Add(l.window).Sub(now), 0), func() { l.summarize(msg) })
	}
	l.mu.Unlock()
}

// summarize ends msg's window: one line for what it left out.
func (l *Limiter) summarize(msg string) {
	l.mu.Lock()
	k := l.kinds[msg]
	dropped, level, last, since := k.dropped, k.level, k.last, k.start
	k.start, k.logged, k.dropped, k.last, k.timer = l.clock.Now(), 0, 0, nil, nil
	l.mu.Unlock()
	if dropped == 0 {
		return
	}
	args := append([]any{"left out", dropped, "since", since.UTC().Format(time.RFC3339)}, last...)
	l.log.Log(context.Background(), level, msg+" (and more like it, left out of the log; the last of them follows)", args...)
}

// Stop ends the pending windows, logging their summaries now.
func (l *Limiter) Stop() {
	l.mu.Lock()
	var pending []string
	for msg, k := range l.kinds {
		if k.timer != nil {
			k.timer.Stop()
			pending = append(pending, msg)
		}
	}
	l.mu.Unlock()
	for _, msg := range pending {
		l.summarize(msg)
	}
}
