package subscription

import (
	"log/slog"
	"time"

	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/retry"
)

// The engine's lines about attempts: one per failed attempt, at debug (a
// failure within budget is routine; the park that ends a budget has its
// own info line, park.go), and at info what an on-call follows: a retry
// that finally succeeded, each long-horizon retry's outcome, and the
// retries spent.

// logAttemptFailed is the line of one failed attempt.
func (r *run) logAttemptFailed(agg, key string, n int, f *retry.Failure, d retry.Decision) {
	info := errorInfo(f, d)
	r.e.logger.Debug("attempt failed", "subscription", r.s.name, "aggregate", agg, "key", key, "attempt", n,
		"class", info.Class, "kind", info.Kind, "classes", info.Classes, "error", info.Message)
}

// logSucceeded says, at info, that an event handled after failed attempts
// was handled at last; a first attempt's success says nothing.
func (r *run) logSucceeded(agg, key string, st *attempts) {
	if st.n <= 1 {
		return
	}
	r.e.logger.Info("attempt succeeded after retries", "subscription", r.s.name, "aggregate", agg, "key", key,
		"attempt", st.n, "since", st.first)
}

// logLongRetryFailed is the line of a failed long-horizon retry: when the
// next is due, or that the retries are spent and the aggregate waits for an
// operator.
func (r *run) logLongRetryFailed(k aggKey, rec *ledger.Record, next time.Time, waits bool) {
	attrs := []any{"subscription", r.s.name, "aggregate", k.String(), "key", recordKey(rec), "retry", rec.ParkedRetries,
		"class", rec.Error.Class, "kind", rec.Error.Kind, "error", rec.Error.Message}
	if waits {
		r.e.storm.Log(slog.LevelInfo, "long-horizon retry failed; retries spent, the aggregate waits for an operator",
			append(attrs, "waitReason", rec.WaitReason)...)
		return
	}
	r.e.storm.Log(slog.LevelInfo, "long-horizon retry failed", append(attrs, "next", next)...)
}
