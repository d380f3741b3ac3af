package subscription

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/internal/clock"
	"github.com/berthhq/berth/internal/logstorm"
	"github.com/berthhq/berth/ledger"
)

// Errors of the engine's operations. Every operation that returns one of
// them leaves the ledger unchanged.
var (
	// ErrUnknownSubscription: no subscription of that name.
	ErrUnknownSubscription = errors.New("subscription: unknown subscription")
	// ErrNotParked: the aggregate is not parked (never was, or is already
	// being resumed).
	ErrNotParked = errors.New("subscription: aggregate not parked")
	// ErrBadVersion: a skip's throughVersion is below the version the
	// aggregate stopped at or beyond its current version.
	ErrBadVersion = errors.New("subscription: version out of range")
	// ErrBadPosition: a reset position beyond the log's head + 1.
	ErrBadPosition = errors.New("subscription: position out of range")
	// ErrBadUntil: a pause's end is not in the future.
	ErrBadUntil = errors.New("subscription: pause end out of range")
	// ErrDuplicate: a subscription of that name already exists.
	ErrDuplicate = errors.New("subscription: duplicate subscription")
	// ErrBusy: the aggregate is being worked on (a long-horizon retry is
	// running) and the caller's context ended before it was free.
	ErrBusy = errors.New("subscription: aggregate busy")
	// ErrClosed: the engine was closed.
	ErrClosed = errors.New("subscription: engine closed")
	// ErrNotOwned: the aggregate's partition is not this host's (another
	// host owns it, or took it from this one); ask the owner.
	ErrNotOwned = errors.New("subscription: partition not owned by this host")
	// ErrBadPartition: Own was given a partition outside 0 to
	// Options.Partitions-1, or called on a single host (Options.Host empty).
	ErrBadPartition = errors.New("subscription: bad partition ownership")
)

// Engine runs subscriptions over one event log and one ledger. The engine
// does not own them: the caller closes them after Close.
type Engine struct {
	events eventlog.Log
	store  ledger.Store
	opts   Options
	clock  clock.Clock
	logger *slog.Logger
	// storm logs the lines said once per aggregate (parked, resumed,
	// rejoined, a long-horizon retry failed), a burst per kind and window,
	// so that a park storm or a bulk job does not flood the log.
	storm *logstorm.Limiter
	obs   observer // Options.Observer (observe.go)

	mu      sync.Mutex
	subs    map[string]*subscription
	order   []string
	started bool
	closed  bool

	host  atomic.Pointer[hostLayer] // the host's retry layer and classifier
	lease hostLease                 // until when the cluster lets this host act (lease.go)

	ctx    context.Context // the engine's lifetime; cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // the scheduler and the retries of failed starts
	sched  *scheduler
	trace  *tracing // spans and the links between attempts (trace.go)
	// bgMu guards bgClosed, set when Close begins: no goroutine joins wg
	// after (goBackground). A leaf.
	bgMu     sync.Mutex
	bgClosed bool
}

// Open returns an engine for the given subscriptions; nothing runs before
// Start.
func Open(events eventlog.Log, store ledger.Store, opts Options, specs ...Spec) (*Engine, error) {
	if events == nil || store == nil {
		return nil, errors.New("subscription: Open needs an event log and a ledger")
	}
	opts.defaults()
	ctx, cancel := context.WithCancel(context.Background())
	e := &Engine{
		events: events, store: store, opts: opts, clock: opts.Clock, logger: opts.Logger, obs: observer{opts.Observer},
		subs: map[string]*subscription{}, ctx: ctx, cancel: cancel,
	}
	e.storm = logstorm.New(opts.Logger, opts.Clock, 0, 0)
	e.lease.base = e.clock.Now()
	e.host.Store(&hostLayer{retry: opts.Retry, parked: opts.Parked, classifier: opts.Classifier})
	e.sched = newScheduler(e)
	e.trace = newTracing(opts.Tracer)
	for _, s := range specs {
		if err := e.add(s); err != nil {
			cancel()
			return nil, err
		}
	}
	return e, nil
}

func (e *Engine) add(spec Spec) error {
	if err := spec.validate(); err != nil {
		return err
	}
	name := spec.name()
	if _, ok := e.subs[name]; ok {
		return fmt.Errorf("%w: %q", ErrDuplicate, name)
	}
	s := &subscription{e: e, name: name, gate: newGate(), keys: newKeyLocks()}
	s.cur.Store(resolve(spec, e.host.Load()))
	e.subs[name] = s
	e.order = append(e.order, name)
	return nil
}

// Add adds a subscription; on a started engine it starts at once, or is
// tried again until it does when its start fails (startretry.go).
func (e *Engine) Add(ctx context.Context, spec Spec) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrClosed
	}
	if err := e.add(spec); err != nil {
		return err
	}
	if e.started {
		// A start that fails is tried again until it works (startretry.go):
		// the subscription is added either way.
		e.subs[spec.name()].start(ctx)
	}
	return nil
}

// Start loads every subscription's checkpoint, pause state and parked
// aggregates and starts delivering. A new subscription's starting point is
// written at once, so that StartEnd means the head at first start, not at
// every start. A subscription whose start fails (its log or ledger away
// for a moment) is tried again until it starts (startretry.go); Start does
// not fail for it.
func (e *Engine) Start(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrClosed
	}
	if e.started {
		return errors.New("subscription: engine already started")
	}
	for _, name := range e.order {
		e.subs[name].start(ctx)
	}
	e.started = true
	e.wg.Add(1)
	go e.sched.loop()
	return nil
}

// Close stops delivery, waits for running attempts to end (they are
// cancelled; a cancelled attempt is neither counted nor parked, its event is
// delivered again after a restart) and writes the checkpoints. ctx bounds the
// final writes.
func (e *Engine) Close(ctx context.Context) error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	started := e.started
	e.mu.Unlock()
	e.closeBackground()
	e.cancel()
	e.wg.Wait()
	var errs []error
	if started {
		for _, name := range e.order {
			errs = append(errs, e.subs[name].stop(ctx, true))
		}
	}
	e.storm.Stop()
	return errors.Join(errs...)
}

// abandon stops like a crash: nothing is flushed. For tests.
func (e *Engine) abandon() {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	e.closeBackground()
	e.cancel()
	e.wg.Wait()
	for _, name := range e.order {
		e.subs[name].stop(context.Background(), false)
	}
}

// Host returns this host's id among the hosts sharing the event log
// (Options.Host; "" for a single host).
func (e *Engine) Host() string { return e.opts.Host }

// Subscriptions returns the names of the engine's subscriptions.
func (e *Engine) Subscriptions() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.order...)
}

func (e *Engine) sub(name string) (*subscription, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.subLocked(name)
}

// subLocked is sub with e.mu held.
func (e *Engine) subLocked(name string) (*subscription, error) {
	s, ok := e.subs[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownSubscription, name)
	}
	return s, nil
}
