package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/berthhq/berth/internal/jsapi"
	"github.com/berthhq/berth/ledger"
	"github.com/nats-io/nats.go/jetstream"
)

// A duty is work that one host of the deployment at a time must do, the
// others standing by: the jobs runner (two runners would act on one record
// twice) and the webhook dispatcher (every host would send each webhook).
//
// It is held by whichever host owns its key, "duty.<name>", in the
// membership bucket (two tokens, so never taken for a host's key). The key
// is a lease as a host's membership is (lease.go), with the bucket's TTL:
// created if absent, renewed every TTL/3 by compare-and-set on its
// revision, deleted on Close. Holding the duty is a term of that lease, and
// the duty's work runs for the term, on its context: it ends at
// sent + TTL - Margin when renewals fail (before the server can expire the
// key, so before any other host can create it), or at once when the key
// turns out to be gone. A host without the duty tries to create the key
// every TTL/3, and at once when its watcher sees the key deleted or
// expired: a holder that stopped renewing (killed, cut off) is replaced
// within the TTL plus a third of it, a holder that closed at once.
//
// Like a partition, a duty is fenced in the ledger: at the start of each
// term, before its work runs, the host claims the duty there at the stored
// epoch + 1 (ledger.Tx.ClaimDuty), and the work gets that claim
// (ledger.DutyFence) to check in every transaction it writes. Should the
// timing fail (a clock that jumped, work slower than Margin to stop), the
// old holder's writes fail with ledger.ErrFenced once the new holder has
// claimed: a job does not put its next record in flight, a webhook is not
// sent, and neither records progress. What the old holder had begun
// before the claim (a resume in the engine, a request on the wire) may
// still land: jobs settle the record in flight, webhooks are at least
// once.

// DutyFunc is a duty's work. It is called when this host takes the duty and
// has claimed it in the ledger, with a context that ends when the host
// loses or gives it up, and the claim, which every ledger write of the
// work checks (fence.Check). It must return within Options.Margin of the
// context's end (before another host may take the duty over). If it
// returns earlier, the host holds the duty idle until the term ends; it is
// called again, with a new claim, at the next term.
type DutyFunc func(ctx context.Context, fence ledger.DutyFence)

// dutyPrefix starts every duty's key.
const dutyPrefix = "duty."

// Duty is this host's side of one duty: its lease on the duty's key, and
// the goroutine that runs the work while the lease holds. Its methods are
// safe for concurrent use.
type Duty struct {
	name   string
	kv     jetstream.KeyValue
	ledger ledger.Store
	lease  *lease
	fn     DutyFunc
	opts   *Options
	stats  counters // the lease's; not the cluster's

	held     atomic.Bool
	fence    atomic.Pointer[ledger.DutyFence] // the claim of the term the work runs in
	cancel   context.CancelFunc
	leased   chan struct{} // lease.run returned
	watched  chan struct{} // watch returned
	followed chan struct{} // follow returned

	closeOnce sync.Once
	closeErr  error
}

// Duty starts standing for the duty name (letters, digits, '-' and '_'):
// fn runs whenever this host holds it. Close gives it up; Cluster.Close
// closes every duty first.
func (c *Cluster) Duty(ctx context.Context, name string, fn DutyFunc) (*Duty, error) {
	if !hostID.MatchString(name) {
		return nil, fmt.Errorf("%w: duty name %q must be letters, digits, '-' and '_'", errOptions, name)
	}
	if fn == nil {
		return nil, fmt.Errorf("%w: duty %q has no work", errOptions, name)
	}
	c.dutiesMu.Lock()
	defer c.dutiesMu.Unlock()
	if c.dutiesClosed {
		return nil, ErrClosed
	}
	for _, d := range c.duties {
		if d.name == name {
			return nil, fmt.Errorf("%w: duty %q twice", errOptions, name)
		}
	}
	d := &Duty{name: name, kv: c.kv, ledger: c.opts.Ledger, fn: fn, opts: &c.opts,
		leased: make(chan struct{}), watched: make(chan struct{}), followed: make(chan struct{})}
	info := memberInfo{Host: c.opts.Host, Address: c.opts.Address, Version: c.opts.Version, Started: c.opts.Clock.Now()}
	d.lease = newLease(c.kv, dutyPrefix+name, &c.opts, info, &d.stats, c.opts.renewEvery())
	d.lease.others = c.anotherLive // the hosts that stand by for the duty
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	d.cancel = cancel
	// Watch before the first try: a key deleted in between is then seen.
	w, err := c.kv.Watch(runCtx, d.lease.key, jetstream.UpdatesOnly())
	if err != nil {
		cancel()
		return nil, fmt.Errorf("cluster: watch duty %q: %w", name, err)
	}
	if err := d.lease.join(runCtx); err != nil && !errors.Is(err, errInUse) {
		c.opts.Logger.Warn("cluster: take duty; trying again", "duty", name, "err", err)
	}
	go func() {
		defer close(d.watched)
		d.watch(runCtx, w)
	}()
	go func() {
		defer close(d.leased)
		d.lease.run(runCtx)
	}()
	go func() {
		defer close(d.followed)
		d.follow(runCtx)
	}()
	c.duties = append(c.duties, d)
	return d, nil
}

// follow runs the work for each term of the lease, until ctx ends.
func (d *Duty) follow(ctx context.Context) {
	for {
		if term := d.lease.current(); term != nil {
			if fence, was, ok := d.claim(term); ok {
				d.fence.Store(&fence)
				d.held.Store(true)
				d.opts.Logger.Info("cluster: duty taken", "duty", d.name, "host", d.opts.Host, "epoch", fence.Epoch, "from", was)
				d.fn(term, fence)
			}
			<-term.Done()
			if d.held.Swap(false) {
				d.fence.Store(nil)
				d.opts.Logger.Info("cluster: duty given up", "duty", d.name, "host", d.opts.Host)
			}
			continue
		}
		select {
		case <-d.lease.changed:
		case <-ctx.Done():
			return
		}
	}
}

// claim claims the duty in the ledger for this term, at the epoch after the
// stored claim's, trying again every retry interval (the ledger may be
// briefly away) until it lands or the term ends (false). It returns the
// claim and the host that held the duty before.
func (d *Duty) claim(term context.Context) (ledger.DutyFence, string, bool) {
	type claimed struct {
		f   ledger.DutyFence
		was string
	}
	c, err := jsapi.Retry(term, retrying(d.opts, d.opts.Clock), jsapi.Always, func(ctx context.Context) (claimed, error) {
		f, was, err := ledger.TakeDuty(ctx, d.ledger, d.name, d.opts.Host)
		if err != nil && term.Err() == nil {
			d.opts.Logger.Warn("cluster: claim duty; trying again", "duty", d.name, "err", err)
		}
		return claimed{f, was}, err
	})
	if err != nil {
		return ledger.DutyFence{}, "", false
	}
	return c.f, c.was, true
}

// watch kicks the lease whenever the duty's key is deleted or expires: a
// host standing by tries to take the duty at once, and the holder finds out
// that it lost it. It watches again when the watcher ends, until ctx does.
func (d *Duty) watch(ctx context.Context, w jetstream.KeyWatcher) {
	_, _ = jsapi.Retry(ctx, retrying(d.opts, d.opts.Clock), jsapi.Always, func(ctx context.Context) (struct{}, error) {
		if w == nil {
			var err error
			if w, err = d.kv.Watch(ctx, d.lease.key, jetstream.UpdatesOnly()); err != nil {
				d.opts.Logger.Warn("cluster: watch duty", "duty", d.name, "err", err)
				return struct{}{}, err
			}
			d.lease.kick() // the key may have gone while nobody watched
		}
		for e := range w.Updates() {
			if e != nil && e.Operation() != jetstream.KeyValuePut {
				d.lease.kick()
			}
		}
		_ = w.Stop()
		w = nil
		return struct{}{}, errWatchEnded
	})
}

// errWatchEnded is the duty's watch ending: it watches again after a pause.
var errWatchEnded = errors.New("cluster: the duty's watch ended")

// Duties returns the duties this host stands for, in the order they were
// started.
func (c *Cluster) Duties() []*Duty {
	c.dutiesMu.Lock()
	defer c.dutiesMu.Unlock()
	return slices.Clone(c.duties)
}

// Name returns the duty's name.
func (d *Duty) Name() string { return d.name }

// Held reports whether this host holds the duty now (its work is running,
// or stopping).
func (d *Duty) Held() bool { return d.held.Load() }

// Fence returns the claim this host's work runs under now: the zero
// DutyFence when it does not hold the duty.
func (d *Duty) Fence() ledger.DutyFence {
	if f := d.fence.Load(); f != nil {
		return *f
	}
	return ledger.DutyFence{}
}

// Holder returns the host that holds the duty as the server has it ("" when
// nobody does), and its address.
func (d *Duty) Holder(ctx context.Context) (host, address string, err error) {
	e, err := d.kv.Get(ctx, d.lease.key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		return "", "", nil
	case err != nil:
		return "", "", fmt.Errorf("cluster: holder of duty %q: %w", d.name, err)
	}
	m, err := decodeMember(e.Value())
	if err != nil {
		return "", "", err
	}
	return m.Host, m.Address, nil
}

// Renewals counts the confirmed writes of the duty's key by this host
// since it started standing for it.
func (d *Duty) Renewals() uint64 { return d.stats.renewals.Load() }

// Close gives the duty up: the work is stopped (its context ends, and Close
// waits for it to return), then the key is deleted, so another host takes
// the duty at once. ctx bounds the wait and the delete.
func (d *Duty) Close(ctx context.Context) error {
	d.closeOnce.Do(func() {
		d.cancel()
		<-d.leased
		<-d.watched
		d.lease.endTerm()
		select {
		case <-d.followed:
		case <-ctx.Done():
			// The work did not stop in time: keep the key, so that nobody
			// takes the duty over while it runs; it expires in a TTL.
			d.closeErr = fmt.Errorf("cluster: duty %q did not stop: %w", d.name, ctx.Err())
			return
		}
		d.closeErr = d.lease.leave(ctx)
	})
	return d.closeErr
}

// closeDuties closes every duty of c (Cluster.Close, first), and refuses
// new ones.
func (c *Cluster) closeDuties(ctx context.Context) error {
	c.dutiesMu.Lock()
	c.dutiesClosed = true
	duties := c.duties
	c.dutiesMu.Unlock()
	var errs []error
	for _, d := range duties {
		errs = append(errs, d.Close(ctx))
	}
	return errors.Join(errs...)
}
