package webhook

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/berthhq/berth/ledger"
)

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
