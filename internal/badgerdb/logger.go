// Package badgerdb opens Badger the way the packages that keep their data in
// it (eventlog, ledger) all do, and forwards Badger's log lines to slog.
package badgerdb

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
)

// Logger implements Badger's Logger: errors as errors, warnings as
// warnings, and Badger's chatty info and debug lines at debug level, each
// tagged with the store's name. It remembers the last error line for the
// store's DB, logged or not.
type Logger struct {
	L     *slog.Logger // nil: nothing is logged
	Store string       // "eventlog", "ledger"
	last  *atomic.Pointer[string]
}

// Errorf logs at error level.
func (b Logger) Errorf(f string, a ...any) {
	if b.last != nil {
		line := strings.TrimSpace(fmt.Sprintf(f, a...))
		b.last.Store(&line)
	}
	b.log(slog.LevelError, f, a)
}

// Warningf logs at warn level.
func (b Logger) Warningf(f string, a ...any) { b.log(slog.LevelWarn, f, a) }

// Infof logs at debug level: Badger's info lines are routine.
func (b Logger) Infof(f string, a ...any) { b.log(slog.LevelDebug, f, a) }

// Debugf logs at debug level.
func (b Logger) Debugf(f string, a ...any) { b.log(slog.LevelDebug, f, a) }

func (b Logger) log(level slog.Level, f string, a []any) {
	ctx := context.Background()
	if b.L == nil || !b.L.Enabled(ctx, level) {
		return
	}
	b.L.Log(ctx, level, strings.TrimSpace(fmt.Sprintf(f, a...)), "component", "badger", "store", b.Store)
}
