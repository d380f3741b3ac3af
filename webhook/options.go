package webhook

import (
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/berthhq/berth/internal/clock"
	"github.com/berthhq/berth/retry"
)

// Defaults applied for zero [Options] fields, and fixed limits.
const (
	// DefaultTimeout bounds one delivery attempt: 10s.
	DefaultTimeout = 10 * time.Second
	// DefaultInitialBackoff is the wait after a delivery's first failed
	// attempt: 1s. It doubles with every further failure.
	DefaultInitialBackoff = time.Second
	// DefaultMaxBackoff caps the doubling backoff: 5m.
	DefaultMaxBackoff = 5 * time.Minute
	// DefaultMaxAttempts is how many failed attempts drop a delivery: 20.
	DefaultMaxAttempts = 20
	// DefaultPollInterval is how often an idle hook looks for new
	// notifications (and the outbox is acknowledged): 1s. [Dispatcher.Wake]
	// cuts the wait short.
	DefaultPollInterval = time.Second
	// DefaultBatchSize is how many notifications a hook reads from the
	// outbox at once: 100.
	DefaultBatchSize = 100
	// MaxRetryAfter caps the delay a Retry-After header can ask for:
	// [retry.MaxRetryAfter] (1h), the cap every Retry-After the host
	// honours has.
	MaxRetryAfter = retry.MaxRetryAfter
	// CursorSubscription is the reserved pseudo-subscription under whose
	// meta the hooks' cursors are kept (key "cursor/" + hook name). No
	// subscription may be named so.
	CursorSubscription = "~webhooks"
	// ackChunk bounds the outbox entries removed in one transaction.
	ackChunk = 5000
)

// ErrClosed is returned by [Dispatcher.Run] after [Dispatcher.Close].
var ErrClosed = errors.New("webhook: dispatcher closed")

// Options configure a [Dispatcher]. The zero value is usable: no hooks (set
// them later with [Dispatcher.SetHooks]) and the defaults below.
type Options struct {
	// Hooks are the endpoints to deliver to; see [ValidateHooks].
	Hooks []Hook
	// Client sends the deliveries (default: a new http.Client on
	// http.DefaultTransport). Its redirect policy applies.
	Client *http.Client
	// Timeout bounds each attempt, from sending the request to reading the
	// answer (default [DefaultTimeout]).
	Timeout time.Duration
	// Clock tells the time: when an attempt is due, the signature timestamp,
	// the backoff's start (default clock.Real()). Tests inject their own.
	Clock clock.Clock
	// InitialBackoff is the wait after the first failed attempt of a
	// delivery (default [DefaultInitialBackoff]); each further failure
	// doubles it, up to MaxBackoff.
	InitialBackoff time.Duration
	// MaxBackoff caps the backoff (default [DefaultMaxBackoff]).
	MaxBackoff time.Duration
	// MaxAttempts is how many failed attempts drop a delivery: it is logged
	// as an error, counted in [HookStats.Dropped], and the hook goes on
	// (default [DefaultMaxAttempts]).
	MaxAttempts int
	// PollInterval is how often an idle hook reads the outbox, and the
	// longest a hook waits before looking at Clock again (default
	// [DefaultPollInterval]).
	PollInterval time.Duration
	// BatchSize is how many notifications a hook reads from the outbox at
	// once (default [DefaultBatchSize]).
	BatchSize int
	// Logger receives failed attempts (warn), dropped deliveries (error)
	// and ledger errors (error); deliveries at debug (default
	// slog.Default()).
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.Client == nil {
		o.Client = &http.Client{}
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Clock == nil {
		o.Clock = clock.Real()
	}
	if o.InitialBackoff <= 0 {
		o.InitialBackoff = DefaultInitialBackoff
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = DefaultMaxBackoff
	}
	o.MaxBackoff = max(o.MaxBackoff, o.InitialBackoff)
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.PollInterval <= 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.BatchSize <= 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// backoff returns the wait after a delivery's failed attempt number n
// (1-based): InitialBackoff doubled n-1 times, at most MaxBackoff, without
// jitter; it is retry's backoff ([retry.Policy.Backoff]) with the hook's
// bounds.
func (o Options) backoff(n int) time.Duration {
	return retry.Policy{InitialBackoff: o.InitialBackoff, MaxBackoff: o.MaxBackoff}.Backoff(n)
}
