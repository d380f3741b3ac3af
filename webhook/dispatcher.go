package webhook

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/berthhq/berth/internal/clock"
	"github.com/berthhq/berth/ledger"
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

// Dispatcher delivers the ledger's outbox to the configured hooks. Create
// it with [New], start it with [Run], stop it with [Close]; its methods are
// safe for concurrent use.
type Dispatcher struct {
	store ledger.Store
	opts  Options
	log   *slog.Logger

	// ackWake pokes the acknowledging loop after a cursor moved.
	ackWake chan struct{}

	mu      sync.Mutex
	err     error              // invalid Options.Hooks, returned by Run
	workers map[string]*worker // the configured hooks by name
	order   []string           // hook names in configuration order
	// stopping holds the done channels of removed hooks' workers, so that
	// a hook added back under that name starts after the old one stopped.
	stopping map[string]<-chan struct{}
	closed   bool
	running  bool
	runCtx   context.Context // the running Run's, nil when not running
	cancel   context.CancelFunc
	fence    ledger.DutyFence // the running Run's
	fenced   error            // the write refused for fence, which ended the Run
	runDone  chan struct{}
	wg       sync.WaitGroup // the workers' goroutines
}

// New returns a dispatcher reading store's outbox; it starts nothing until
// [Dispatcher.Run]. Invalid opts.Hooks (see [ValidateHooks]) make Run fail.
// store must outlive the dispatcher: close the dispatcher first.
func New(store ledger.Store, opts Options) *Dispatcher {
	opts = opts.withDefaults()
	d := &Dispatcher{
		store:    store,
		opts:     opts,
		log:      opts.Logger,
		ackWake:  make(chan struct{}, 1),
		workers:  map[string]*worker{},
		stopping: map[string]<-chan struct{}{},
	}
	if err := ValidateHooks(opts.Hooks); err != nil {
		d.err = err
		return d
	}
	for _, h := range opts.Hooks {
		d.workers[h.Name] = newWorker(d, h.clone())
		d.order = append(d.order, h.Name)
	}
	d.opts.Hooks = nil // the workers own the configuration
	return d
}

func (d *Dispatcher) now() time.Time { return d.opts.Clock.Now() }

// Run delivers until ctx is done or [Dispatcher.Close] is called: it returns
// nil after Close, ctx's error when ctx ended it, [ErrClosed] when called
// after Close, and the validation error of Options.Hooks at once. Only one
// Run may be active at a time; a Run after one that ctx ended goes on from
// the cursors stored in the ledger (which another dispatcher on a shared
// ledger may have moved meanwhile). An attempt in flight when Run stops is
// abandoned and sent again later (at least once).
func (d *Dispatcher) Run(ctx context.Context) error {
	return d.RunFenced(ctx, ledger.DutyFence{})
}

// RunFenced is Run for the host holding a cluster's webhooks duty, under
// the duty's claim: every ledger write of the dispatcher checks fence (the
// hooks' cursors, the outbox's acknowledgement), and so does a read of the
// ledger right before each delivery is sent. Once another host has
// claimed the duty, the ledger refuses them (ledger.ErrFenced): nothing
// more is sent from here, and RunFenced returns that error. The zero fence
// fences nothing (Run).
func (d *Dispatcher) RunFenced(ctx context.Context, fence ledger.DutyFence) error {
	d.mu.Lock()
	switch {
	case d.err != nil:
		d.mu.Unlock()
		return d.err
	case d.closed:
		d.mu.Unlock()
		return ErrClosed
	case d.running || (d.runDone != nil && !isClosed(d.runDone)):
		d.mu.Unlock()
		return errors.New("webhook: Run is already running")
	}
	runCtx, cancel := context.WithCancel(ctx)
	d.running, d.runCtx, d.cancel, d.runDone = true, runCtx, cancel, make(chan struct{})
	d.fence, d.fenced = fence, nil
	for _, name := range d.order {
		// Another dispatcher on a shared ledger may have delivered since an
		// earlier Run of this one (a cluster's webhooks duty moves between
		// hosts): each Run starts from the stored cursors.
		d.workers[name].forget()
		d.startLocked(d.workers[name], nil)
	}
	done := d.runDone
	d.mu.Unlock()

	defer func() {
		cancel()
		// No worker starts once running is false, so the Wait below does
		// not race with an Add.
		d.mu.Lock()
		d.running, d.runCtx, d.cancel = false, nil, nil
		d.mu.Unlock()
		d.wg.Wait()
		close(done)
	}()

	t := time.NewTicker(d.opts.PollInterval)
	defer t.Stop()
	for {
		if err := d.ack(runCtx); err != nil && runCtx.Err() == nil {
			d.log.Error("webhook: acknowledging the outbox failed", "error", err)
		}
		select {
		case <-runCtx.Done():
			d.mu.Lock()
			closed, fenced := d.closed, d.fenced
			d.mu.Unlock()
			switch {
			case closed:
				return nil
			case fenced != nil && ctx.Err() == nil:
				return fenced
			}
			return ctx.Err()
		case <-t.C:
		case <-d.ackWake:
		}
	}
}

// startLocked starts w's goroutine on the running Run's context; after
// waits for a previous worker of the same name to stop. d.mu is held.
func (d *Dispatcher) startLocked(w *worker, after <-chan struct{}) {
	ctx, cancel := context.WithCancel(d.runCtx)
	done := make(chan struct{})
	w.setRun(cancel, done)
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		defer close(done)
		if after != nil {
			select {
			case <-after:
			case <-ctx.Done():
				return
			}
		}
		w.run(ctx)
	}()
}

// Close stops [Dispatcher.Run] and waits for it to return, or for ctx to
// be done (then it returns ctx's error; the workers stop on their own
// shortly after, as their requests are cancelled). Closing again does
// nothing. Close the dispatcher before the store.
func (d *Dispatcher) Close(ctx context.Context) error {
	d.mu.Lock()
	d.closed = true
	cancel, done := d.cancel, d.runDone
	running := d.running
	d.mu.Unlock()
	if !running {
		if done == nil {
			return nil
		}
	} else {
		cancel()
	}
	select { // the Run, or one finishing on its own
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Wake makes every hook look at the outbox (and its backoff) now instead of
// at its next poll: call it after committing a notification.
func (d *Dispatcher) Wake() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, w := range d.workers {
		w.poke()
	}
	d.pokeAck()
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func (d *Dispatcher) pokeAck() {
	select {
	case d.ackWake <- struct{}{}:
	default:
	}
}

// SetHooks replaces the configured hooks, for a configuration reload. An
// invalid set (see [ValidateHooks]) is refused and the running hooks stay.
// Hooks are matched by name: a removed hook stops (its in-flight attempt is
// abandoned; its cursor stays, so adding it back resumes); an added one
// starts from its stored cursor (or the oldest notification queued); a
// changed one applies to its next attempt, and when its URL or secret
// changed its in-flight delivery is tried again at once with a fresh
// attempt budget.
func (d *Dispatcher) SetHooks(hooks []Hook) error {
	if err := ValidateHooks(hooks); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err != nil {
		d.err = nil // a valid set replaces the invalid Options.Hooks
	}
	next := make(map[string]*worker, len(hooks))
	order := make([]string, 0, len(hooks))
	for _, h := range hooks {
		h = h.clone()
		order = append(order, h.Name)
		if w, ok := d.workers[h.Name]; ok {
			w.reconfigure(h)
			next[h.Name] = w
			continue
		}
		w := newWorker(d, h)
		next[h.Name] = w
		if d.running {
			d.startLocked(w, d.stopping[h.Name])
		}
		delete(d.stopping, h.Name)
	}
	for name, w := range d.workers {
		if _, ok := next[name]; !ok {
			if done := w.stop(); done != nil {
				d.stopping[name] = done
			}
		}
	}
	d.workers, d.order = next, order
	d.pokeAck()
	return nil
}

// HookStats describes one hook's deliveries since [New].
type HookStats struct {
	// Name is the hook's name.
	Name string
	// Delivered counts deliveries answered with 2xx.
	Delivered uint64
	// FailedAttempts counts attempts that failed: network errors, timeouts
	// and answers other than 2xx.
	FailedAttempts uint64
	// Dropped counts deliveries given up after MaxAttempts failures.
	Dropped uint64
	// Pending counts the queued notifications the hook wants and has not
	// delivered yet, the one in flight included; -1 when the ledger could
	// not be read.
	Pending int
	// Cursor is the Seq of the last notification the hook is done with.
	Cursor uint64
	// Attempts counts the failed attempts of the delivery in flight.
	Attempts int
	// NextAttempt is when the delivery in flight is tried again; zero when
	// no delivery waits.
	NextAttempt time.Time
	// LastError is the error of the last failed attempt, empty after a
	// success.
	LastError string
}

// Stats returns every configured hook's statistics, in configuration order.
// Pending is counted by reading the outbox, which costs a scan of the
// notifications not yet acknowledged.
func (d *Dispatcher) Stats() []HookStats {
	d.mu.Lock()
	ws := make([]*worker, 0, len(d.order))
	for _, name := range d.order {
		ws = append(ws, d.workers[name])
	}
	d.mu.Unlock()

	out := make([]HookStats, len(ws))
	hooks := make([]Hook, len(ws))
	loaded := make([]bool, len(ws))
	for i, w := range ws {
		out[i], hooks[i], loaded[i] = w.stats()
	}
	err := d.store.View(context.Background(), func(tx ledger.Tx) error {
		low := uint64(math.MaxUint64)
		for i := range out {
			if !loaded[i] {
				c, err := readCursor(tx, out[i].Name)
				if err != nil {
					return err
				}
				out[i].Cursor = c
			}
			out[i].Pending = 0
			low = min(low, out[i].Cursor)
		}
		if len(out) == 0 {
			return nil
		}
		const page = 1000
		for after := low; ; {
			ns, err := tx.Notifications(after, page)
			if err != nil {
				return err
			}
			for _, n := range ns {
				for i := range out {
					if n.Seq > out[i].Cursor && hooks[i].Wants(n.Type, n.Subscription) {
						out[i].Pending++
					}
				}
				after = n.Seq
			}
			if len(ns) < page {
				return nil
			}
		}
	})
	if err != nil {
		for i := range out {
			out[i].Pending = -1
		}
	}
	return out
}

// runFence returns the fence of the running Run.
func (d *Dispatcher) runFence() ledger.DutyFence {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.fence
}

// checkFenced ends the running Run if err says the ledger refused a write
// for its fence (another host claimed the webhooks duty), and reports
// whether it did.
func (d *Dispatcher) checkFenced(err error) bool {
	if !errors.Is(err, ledger.ErrFenced) {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fenced == nil && d.cancel != nil {
		d.fenced = err
		d.cancel()
		d.log.Warn("webhook: the webhooks duty moved to another host; sending nothing more here", "error", err)
	}
	return true
}

// ack removes the outbox entries every configured hook is done with: up to
// the smallest durable cursor, or all of them when no hook is configured. A
// read-only look comes first, so that the ledger's writers are not held up
// when there is nothing to remove.
func (d *Dispatcher) ack(ctx context.Context) error {
	for ctx.Err() == nil {
		var oldest, target uint64
		err := d.store.View(ctx, func(tx ledger.Tx) (err error) {
			oldest, target, err = d.ackRange(tx)
			return err
		})
		if err != nil || oldest == 0 || oldest > target {
			return err
		}
		var through uint64
		fence := d.runFence()
		err = d.store.Update(ctx, func(tx ledger.Tx) error {
			if err := fence.Check(tx); err != nil {
				return err
			}
			oldest, target, err := d.ackRange(tx)
			if err != nil || oldest == 0 || oldest > target {
				return err
			}
			through = min(target, oldest+ackChunk-1)
			return tx.AckNotifications(through)
		})
		if d.checkFenced(err) || err != nil || through == 0 || through >= target {
			return err
		}
	}
	return nil
}

// ackRange returns the Seq of the oldest queued notification (0 when the
// outbox is empty) and the Seq through which every hook is done.
func (d *Dispatcher) ackRange(tx ledger.Tx) (oldest, target uint64, err error) {
	ns, err := tx.Notifications(0, 1)
	if err != nil || len(ns) == 0 {
		return 0, 0, err
	}
	d.mu.Lock()
	names := slices.Clone(d.order)
	d.mu.Unlock()
	target = math.MaxUint64
	for _, name := range names {
		c, err := readCursor(tx, name)
		if err != nil {
			return 0, 0, err
		}
		target = min(target, c)
	}
	return ns[0].Seq, target, nil
}

func cursorKey(name string) string { return "cursor/" + name }

// readCursor returns the hook's durable cursor, 0 when none is stored.
func readCursor(tx ledger.SubscriptionState, name string) (uint64, error) {
	v, err := tx.Meta(CursorSubscription, cursorKey(name))
	if errors.Is(err, ledger.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	c, err := strconv.ParseUint(string(v), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("webhook: corrupt cursor of hook %q: %q", name, v)
	}
	return c, nil
}

func writeCursor(tx ledger.SubscriptionState, name string, c uint64) error {
	return tx.SetMeta(CursorSubscription, cursorKey(name), strconv.AppendUint(nil, c, 10))
}
