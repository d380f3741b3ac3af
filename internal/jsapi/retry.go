package jsapi

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/berthhq/berth/internal/clock"
)

// Timeouts and pauses of the requests to NATS, each named once here.
const (
	// RequestTimeout bounds one request to NATS by default: a stream's
	// creation or info, a publish's acknowledgement, a get
	// (store.jetstream.connect-timeout's default). A request lost with its
	// node is asked again after it.
	RequestTimeout = 5 * time.Second

	// DefaultWait bounds all the tries of a Retry whose context has no
	// deadline (Policy.Within), and a host's open of each JetStream part
	// (store.jetstream.open-timeout's default).
	DefaultWait = 30 * time.Second

	// FirstTry bounds the first try of an Opening policy: a create that NATS
	// will never answer (another host's identical one went first) costs a
	// host that long, not a whole request timeout.
	FirstTry = time.Second

	// FirstPause is the pause after a first failed try (Policy.FirstPause):
	// a leader election is often over by then.
	FirstPause = 50 * time.Millisecond

	// MaxPause is the longest pause between two tries (Policy.MaxPause):
	// each pause is twice the one before up to it, so a cluster that takes
	// long to come back is not asked many times a second meanwhile.
	MaxPause = time.Second
)

// UntilDone as Policy.Within: only the caller's context ends the tries.
const UntilDone time.Duration = -1

// Policy says how Retry asks again: how long each try may take, how long it
// pauses between tries and when it gives up. A zero field means the default
// its comment names, so Policy{} asks with real-time pauses from FirstPause
// to MaxPause, each try bounded by the caller's context only, for DefaultWait
// at most when that context has no deadline.
type Policy struct {
	// PerTry bounds each try: its context ends PerTry after it starts (a
	// request sent to a node as it went down is never answered). Default
	// (0): the try has what is left of the caller's context.
	PerTry time.Duration

	// FirstTry bounds the first try; each next has twice as long, up to
	// PerTry. Default (0), or more than PerTry: PerTry.
	FirstTry time.Duration

	// FirstPause is the pause after the first failed try; each next pause
	// is twice as long, up to MaxPause. Default (0): FirstPause.
	FirstPause time.Duration

	// MaxPause is the longest pause; the same as FirstPause makes every
	// pause alike. Default (0): MaxPause, or FirstPause when that is
	// longer.
	MaxPause time.Duration

	// Within bounds all the tries when the caller's context has no
	// deadline; UntilDone leaves that to the context. Default (0):
	// DefaultWait.
	Within time.Duration

	// Attempts bounds how many tries are made. Default (0): as many as
	// time allows.
	Attempts int

	// Clock times the pauses between tries (a test's clock.Fake). Default
	// (nil): clock.Real(). The tries' own bounds are the requests' timeouts
	// to NATS, in real time.
	Clock clock.Clock
}

// Opening is the policy of a request NATS may leave unanswered for good — a
// create another host's identical one went first, a list through a consumer
// on a server not ready — rather than late: the first try is bounded by
// FirstTry, each next by twice as long up to perTry, so a cluster slower
// than that to answer is still waited for.
func Opening(perTry time.Duration) Policy {
	return Policy{FirstTry: min(FirstTry, perTry), PerTry: perTry}
}

// Every is the policy of a loop that asks again after the same pause every
// time, until its context ends (connecting to servers still starting, a
// watch that failed): set PerTry, Attempts or Clock on it as needed.
func Every(pause time.Duration) Policy {
	return Policy{FirstPause: pause, MaxPause: pause, Within: UntilDone}
}

// GaveUp is Retry's error when it stopped while the last try's error was
// still worth another: the caller's context ended (or Policy.Within passed)
// or Policy.Attempts tries were made. It unwraps to that last error and
// says how long Retry tried.
type GaveUp struct {
	Err   error         // the last try's
	Tries int           // how many were made
	For   time.Duration // from the first try to giving up
}

func (e *GaveUp) Error() string {
	return fmt.Sprintf("%v (tried for %v)", e.Err, e.For.Round(time.Millisecond))
}

func (e *GaveUp) Unwrap() error { return e.Err }

// Retry calls op until it returns nil, or an error retryable says is not
// worth another try, or one op returned as Permanent(err) (then err, as it
// is), pausing between tries as p says. It gives up, with a *GaveUp
// holding the last error, when ctx ends, Within passes (a ctx without a
// deadline) or Attempts tries were made. Every loop in Berth that asks NATS
// again goes through it.
func Retry[T any](ctx context.Context, p Policy, retryable func(error) bool, op func(context.Context) (T, error)) (T, error) {
	p = p.withDefaults()
	if _, ok := ctx.Deadline(); !ok && p.Within != UntilDone {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.Within)
		defer cancel()
	}
	start := time.Now()
	pause, try := p.FirstPause, p.FirstTry
	for n := 1; ; n++ {
		v, err := once(ctx, try, op)
		var perm *permanent
		if errors.As(err, &perm) {
			return v, perm.err
		}
		if err == nil || !retryable(err) {
			return v, err
		}
		if ctx.Err() != nil || n == p.Attempts || clock.Sleep(ctx, p.Clock, pause) != nil {
			return v, &GaveUp{Err: err, Tries: n, For: time.Since(start)}
		}
		try, pause = min(2*try, p.PerTry), min(2*pause, p.MaxPause)
	}
}

// Permanent marks err, returned by op as it is, as one Retry returns at
// once, unmarked, whatever its retryable says: op knows better than the
// predicate (a message purged for good, a store that stopped).
// Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanent{err}
}

// permanent is an error marked Permanent.
type permanent struct{ err error }

func (p *permanent) Error() string { return p.err.Error() }
func (p *permanent) Unwrap() error { return p.err }

// Always is the retryable of an op every error of which is worth another
// try (until the Policy gives up); op marks the exceptions Permanent.
func Always(error) bool { return true }

// once makes one try of op, bounded by bound when that is not 0.
func once[T any](ctx context.Context, bound time.Duration, op func(context.Context) (T, error)) (T, error) {
	if bound <= 0 {
		return op(ctx)
	}
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	return op(ctx)
}

// Ask is Retry of a request NATS answers at once when it can — a publish,
// a get, an object store's put — while it is Transient, every try having
// the whole perTry: a short first try would only send such a request twice
// on a loaded machine. It is how a write a client waits for is asked again
// through a leader election within the client's deadline (ctx's); the last
// error of a ctx that ended is still Transient, for the caller to answer
// "unavailable, try again" rather than fail.
func Ask[T any](ctx context.Context, perTry time.Duration, op func(context.Context) (T, error)) (T, error) {
	return Retry(ctx, Policy{PerTry: perTry}, Transient, op)
}

// withDefaults returns p with its zero fields given their defaults.
func (p Policy) withDefaults() Policy {
	if p.FirstTry == 0 || p.FirstTry > p.PerTry {
		p.FirstTry = p.PerTry
	}
	if p.FirstPause == 0 {
		p.FirstPause = FirstPause
	}
	if p.MaxPause == 0 {
		p.MaxPause = max(MaxPause, p.FirstPause)
	}
	if p.Within == 0 {
		p.Within = DefaultWait
	}
	if p.Clock == nil {
		p.Clock = clock.Real()
	}
	return p
}
