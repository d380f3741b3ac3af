// Package subscription delivers the events of the event log to handlers and
// owns what happens when they fail: the retry budget, classification of each
// failure, systemic pauses of a partition, backpressure, parking of the one
// failing aggregate in the failure ledger while every other aggregate goes on,
// long-horizon retries of parked aggregates, and the operator's resume and
// skip.
//
// Lock order, outermost first: subscription.life, the aggregate's key lock,
// run.budgets.mu, subscription.cpMu, partition.mu, tracker.mu. No lock is held across a
// handler call.
package subscription

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/retry"
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
	// ErrDuplicate: a subscription of that name already exists.
	ErrDuplicate = errors.New("subscription: duplicate subscription")
	// ErrBusy: the aggregate is being worked on (a long-horizon retry is
	// running) and the caller's context ended before it was free.
	ErrBusy = errors.New("subscription: aggregate busy")
	// ErrClosed: the engine was closed.
	ErrClosed = errors.New("subscription: engine closed")
)

// Options configure an Engine. Zero values take the defaults named.
type Options struct {
	// Partitions is the number of partitions per subscription; an aggregate
	// belongs to partition FNV-1a(type, 0, id) mod Partitions. Default 16.
	// Changing it on a running system is safe: order is per aggregate and
	// only in-memory state depends on the partition.
	Partitions int
	// Concurrency is the number of aggregates a partition handles at once.
	// Default 4.
	Concurrency int
	// Retry is the host's default retry layer ([subscription.retry]) over
	// retry.Defaults().
	Retry retry.Settings
	// Parked is the host's long-horizon retry layer ([subscription.parked])
	// over retry.DefaultParked().
	Parked retry.ParkedSettings
	// Systemic is the window in which that many distinct aggregates of one
	// partition failing makes the failure systemic. Default
	// retry.DefaultSystemicWindow() (3 aggregates in 10 s).
	Systemic retry.SystemicWindow
	// Classifier is the application-wide classifier; nil: none.
	Classifier *retry.Classifier
	// CheckpointEvery and CheckpointInterval batch checkpoint writes: one
	// write per CheckpointEvery finished commits or per CheckpointInterval,
	// whichever comes first. Defaults 100 and 200 ms.
	CheckpointEvery    int
	CheckpointInterval time.Duration
	// ReadBatch is how many commits the reader asks the log for at once.
	// Default 256.
	ReadBatch int
	// MaxInFlight bounds the commits read but not finished per subscription;
	// the reader waits for room. Default 8192.
	MaxInFlight int
	// Clock is the source of time for every wait of the failure model.
	// Default RealClock().
	Clock Clock
	// Logger receives the engine's log. Default: discarded.
	Logger *slog.Logger
	// Jitter returns a number in [0, 1) for backpressure jitter. Default
	// math/rand/v2.Float64.
	Jitter func() float64
}

func (o *Options) defaults() {
	if o.Partitions <= 0 {
		o.Partitions = 16
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 4
	}
	if o.Systemic.Aggregates <= 0 || o.Systemic.Window <= 0 {
		d := retry.DefaultSystemicWindow()
		if o.Systemic.Aggregates <= 0 {
			o.Systemic.Aggregates = d.Aggregates
		}
		if o.Systemic.Window <= 0 {
			o.Systemic.Window = d.Window
		}
	}
	if o.CheckpointEvery <= 0 {
		o.CheckpointEvery = 100
	}
	if o.CheckpointInterval <= 0 {
		o.CheckpointInterval = 200 * time.Millisecond
	}
	if o.ReadBatch <= 0 {
		o.ReadBatch = 256
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = 8192
	}
	if o.Clock == nil {
		o.Clock = RealClock()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Jitter == nil {
		o.Jitter = randFloat
	}
}

// Engine runs subscriptions over one event log and one ledger. The engine
// does not own them: the caller closes them after Close.
type Engine struct {
	events eventlog.Log
	store  ledger.Store
	opts   Options
	clock  Clock
	logger *slog.Logger

	mu      sync.Mutex
	subs    map[string]*subscription
	order   []string
	started bool
	closed  bool

	host atomic.Pointer[hostLayer] // the host's retry layer and classifier

	ctx    context.Context // the engine's lifetime; cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup
	sched  *scheduler
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
		events: events, store: store, opts: opts, clock: opts.Clock, logger: opts.Logger,
		subs: map[string]*subscription{}, ctx: ctx, cancel: cancel,
	}
	e.host.Store(&hostLayer{retry: opts.Retry, parked: opts.Parked, classifier: opts.Classifier})
	e.sched = newScheduler(e)
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

// Add adds a subscription; on a started engine it starts at once.
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
		s := e.subs[spec.name()]
		if err := s.start(ctx); err != nil {
			delete(e.subs, s.name)
			e.order = e.order[:len(e.order)-1]
			return err
		}
	}
	return nil
}

// Start loads every subscription's checkpoint, pause state and parked
// aggregates and starts delivering. A new subscription's starting point is
// written at once, so that StartEnd means the head at first start, not at
// every start.
func (e *Engine) Start(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrClosed
	}
	if e.started {
		return errors.New("subscription: engine already started")
	}
	for i, name := range e.order {
		if err := e.subs[name].start(ctx); err != nil {
			for _, prev := range e.order[:i] {
				e.subs[prev].stop(ctx, true)
			}
			return err
		}
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
	e.cancel()
	e.wg.Wait()
	var errs []error
	if started {
		for _, name := range e.order {
			errs = append(errs, e.subs[name].stop(ctx, true))
		}
	}
	return errors.Join(errs...)
}

// abandon stops like a crash: nothing is flushed. For tests.
func (e *Engine) abandon() {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	e.cancel()
	e.wg.Wait()
	for _, name := range e.order {
		e.subs[name].stop(context.Background(), false)
	}
}

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

// subscription is one handler's subscription; its run is the in-memory
// delivery state, replaced on Reset.
type subscription struct {
	e    *Engine
	name string
	// cur is read without a lock by every attempt; it is written only with
	// Engine.mu held (add, UpdateSpec, SetHostDefaults), so that a spec and
	// the host's layer are never resolved from two reloads' halves.
	cur atomic.Pointer[resolved]

	life sync.RWMutex // write-held while the run is replaced
	run  *run         // nil when not started
	cpMu sync.Mutex   // serializes checkpoint writes
	gate *gate        // closed while the subscription is paused
	keys *keyLocks    // serializes ledger changes per aggregate
}

// start loads the durable state and starts a run.
func (s *subscription) start(ctx context.Context) error {
	s.life.Lock()
	defer s.life.Unlock()
	return s.startLocked(ctx)
}

func (s *subscription) startLocked(ctx context.Context) error {
	e := s.e
	var (
		from    uint64
		paused  bool
		records []*ledger.Record
	)
	head, err := e.events.Head(ctx)
	if err != nil {
		return fmt.Errorf("subscription %q: %w", s.name, err)
	}
	err = e.store.Update(ctx, func(tx ledger.Tx) error {
		cp, ok, err := tx.Checkpoint(s.name)
		if err != nil {
			return err
		}
		if !ok {
			cp = 1
			if s.cur.Load().spec.Start == StartEnd {
				cp = head + 1
			}
			if err := tx.SetCheckpoint(s.name, cp); err != nil {
				return err
			}
		}
		from = max(cp, 1)
		v, err := tx.Meta(s.name, metaPaused)
		switch {
		case errors.Is(err, ledger.ErrNotFound):
		case err != nil:
			return err
		default:
			paused = string(v) == "true"
		}
		after := ""
		for {
			page, next, err := tx.ListParked(ledger.Filter{Subscription: s.name, After: after, Limit: 500})
			if err != nil {
				return err
			}
			records = append(records, page...)
			if next == "" {
				return nil
			}
			after = next
		}
	})
	if err != nil {
		return fmt.Errorf("subscription %q: %w", s.name, err)
	}
	s.gate.set(!paused)
	r := newRun(s, from)
	for _, rec := range records {
		k := aggKey{rec.AggregateType, rec.AggregateID}
		p := r.partitionOf(k)
		a := p.agg(k)
		switch rec.State {
		case ledger.StateResuming:
			// A resume was under way when the engine stopped: run it again
			// from where it started; events replayed before the stop are
			// delivered again (at least once).
			a.mode = modeReplaying
			a.pinned = pinnedKey{rec.Version, int(rec.Index), recordKey(rec)}
			r.wg.Add(1)
			go r.replay(p, a, uint64(rec.Version), int(rec.Index))
		default:
			a.mode = modeHeld
			if rec.State == ledger.StateRetrying {
				at := rec.NextRetry
				if parkedUnrecoverable(rec) && !s.cur.Load().parked.RetriesUnrecoverable() {
					// Parked unrecoverable by a host that retried such parks:
					// no retry is due; turn it over to an operator at once
					// (parkedRetry makes no attempt for it).
					at = e.clock.Now()
				}
				e.sched.add(s.name, k, at)
			}
		}
	}
	r.wg.Add(2)
	go r.reader()
	go r.flusher()
	s.run = r
	return nil
}

// stop ends the run, waiting for its goroutines; with flush it writes the
// checkpoint.
func (s *subscription) stop(ctx context.Context, flush bool) error {
	s.life.Lock()
	defer s.life.Unlock()
	return s.stopLocked(ctx, flush)
}

func (s *subscription) stopLocked(ctx context.Context, flush bool) error {
	r := s.run
	if r == nil {
		return nil
	}
	s.run = nil
	r.cancel()
	r.wg.Wait()
	if flush {
		if err := r.flush(ctx); err != nil {
			return fmt.Errorf("subscription %q: final checkpoint: %w", s.name, err)
		}
	}
	return nil
}

// current returns the running run and a release func, or an error if the
// subscription is not running; the run cannot be replaced before release.
func (s *subscription) current() (*run, func(), error) {
	s.life.RLock()
	if s.run == nil {
		s.life.RUnlock()
		return nil, nil, fmt.Errorf("subscription %q: not running: %w", s.name, ErrClosed)
	}
	return s.run, s.life.RUnlock, nil
}

const metaPaused = "paused"

// run is one subscription's delivery from one starting point: the reader,
// the partitions and the checkpoint tracker. Reset replaces it.
type run struct {
	s        *subscription
	e        *Engine
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	tracker  *tracker
	parts    []*partition
	flushReq chan struct{}
	budgets  budgetHints   // which aggregates may have a spent budget recorded
	parks    atomic.Uint64 // the parks made, numbering them (aggState.park)
}

func newRun(s *subscription, from uint64) *run {
	ctx, cancel := context.WithCancel(s.e.ctx)
	r := &run{s: s, e: s.e, ctx: ctx, cancel: cancel, tracker: newTracker(from), flushReq: make(chan struct{}, 1)}
	r.parts = make([]*partition, s.e.opts.Partitions)
	for i := range r.parts {
		r.parts[i] = newPartition(r, i)
	}
	return r
}

// reader reads the log from the checkpoint, in order, and hands each commit
// to its aggregate's partition; commits with no event of interest are passed
// over at once.
func (r *run) reader() {
	defer r.wg.Done()
	pos := r.tracker.lowWater()
	batch := r.e.opts.ReadBatch
	for {
		if err := r.s.gate.wait(r.ctx); err != nil {
			return
		}
		if err := r.tracker.waitRoom(r.ctx, r.e.opts.MaxInFlight); err != nil {
			return
		}
		n, _ := r.tracker.inFlight()
		limit := min(batch, r.e.opts.MaxInFlight-n)
		commits, err := r.e.events.Read(r.ctx, pos, limit)
		if err != nil {
			if r.ctx.Err() != nil {
				return
			}
			r.e.logger.Error("reading the event log failed", "subscription", r.s.name, "position", pos, "err", err)
			if sleepReal(r.ctx, time.Second) != nil {
				return
			}
			continue
		}
		if len(commits) == 0 {
			if err := r.e.events.Wait(r.ctx, pos-1); err != nil {
				if r.ctx.Err() != nil {
					return
				}
				r.e.logger.Error("waiting on the event log failed", "subscription", r.s.name, "err", err)
				if sleepReal(r.ctx, time.Second) != nil {
					return
				}
			}
			continue
		}
		cur := r.s.cur.Load()
		for i := range commits {
			c := commits[i]
			r.tracker.register(c.Position)
			pos = c.Position + 1
			if !cur.wantsAny(&c, 0) {
				r.finished(c.Position)
				continue
			}
			k := aggKey{c.AggregateType, c.AggregateID}
			r.partitionOf(k).dispatch(k, c)
		}
	}
}

// sleepReal waits d of real time: used only to pace retries of the engine's
// own I/O errors, which are not part of the failure model under test.
func sleepReal(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// gate is open or closed; wait blocks while it is closed.
type gate struct {
	mu   sync.Mutex
	open bool
	ch   chan struct{} // closed while the gate is open
	// blocked counts the goroutines in wait on the closed gate. Nothing in
	// the engine reads it: it lets the package's tests know a paused reader
	// has stopped where it would otherwise read, instead of sleeping.
	blocked int
}

func newGate() *gate {
	g := &gate{open: true, ch: make(chan struct{})}
	close(g.ch)
	return g
}

func (g *gate) set(open bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if open == g.open {
		return
	}
	g.open = open
	if open {
		close(g.ch)
	} else {
		g.ch = make(chan struct{})
	}
}

func (g *gate) isOpen() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.open
}

// opened returns a channel closed while the gate is open.
func (g *gate) opened() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.ch
}

func (g *gate) wait(ctx context.Context) error {
	g.mu.Lock()
	ch, open := g.ch, g.open
	if !open {
		g.blocked++
	}
	g.mu.Unlock()
	if !open {
		defer func() {
			g.mu.Lock()
			g.blocked--
			g.mu.Unlock()
		}()
	}
	select {
	case <-ch:
		return ctx.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
}
