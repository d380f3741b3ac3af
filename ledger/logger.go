package ledger

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
)

// badgerLogger forwards Badger's log lines to a slog.Logger: errors as
// errors, warnings as warnings, and Badger's chatty info and debug lines at
// debug level.
type badgerLogger struct{ l *slog.Logger }

func (b badgerLogger) Errorf(f string, a ...any)   { b.log(slog.LevelError, f, a) }
func (b badgerLogger) Warningf(f string, a ...any) { b.log(slog.LevelWarn, f, a) }
func (b badgerLogger) Infof(f string, a ...any)    { b.log(slog.LevelDebug, f, a) }
func (b badgerLogger) Debugf(f string, a ...any)   { b.log(slog.LevelDebug, f, a) }

func (b badgerLogger) log(level slog.Level, f string, a []any) {
	ctx := context.Background()
	if !b.l.Enabled(ctx, level) {
		return
	}
	b.l.Log(ctx, level, strings.TrimSpace(fmt.Sprintf(f, a...)), "component", "badger", "store", "ledger")
}
