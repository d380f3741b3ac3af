package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/berthhq/berth/internal/jsapi"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrClosed is returned by the methods of a closed Cluster.
var ErrClosed = errors.New("cluster: closed")

// Cluster is this host's place in a deployment of Berth hosts: its lease in
// the membership bucket, the live set its watcher keeps, and the partitions
// it owns. One goroutine (loop) owns the ownership; the lease's goroutine
// owns the key's revision. Its methods are safe for concurrent use.
type Cluster struct {
	opts  Options
	nc    *nats.Conn
	kv    jetstream.KeyValue
	lease *lease
	stats counters

	setSubs chan []string
	closing chan context.Context
	done    chan struct{} // loop returned
	leased  chan struct{} // lease.run returned
	cancel  context.CancelFunc

	closeOnce sync.Once
	closeErr  error

	dutiesMu     sync.Mutex // guards duties and dutiesClosed (duty.go)
	duties       []*Duty
	dutiesClosed bool

	mu      sync.Mutex // guards the views below, which loop publishes
	members map[string]liveMember
	owned   map[string]map[int]uint64
	subs    []string
}

// liveMember is a host in the live set, as this host's watcher saw it.
type liveMember struct {
	info memberInfo
	seen time.Time // this host's clock when the watcher saw its last write
}

// Open joins the deployment whose membership is in nc's JetStream: it
// creates the membership bucket if there is none, joins as opts.Host (if a
// key of that id is live — this host's previous run, killed less than a TTL
// ago — it waits up to a TTL for it to expire) and starts claiming the
// partitions rendezvous hashing gives it. Close leaves.
func Open(ctx context.Context, nc *nats.Conn, opts Options) (*Cluster, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("cluster: jetstream: %w", err)
	}
	bctx, cancel := context.WithTimeout(ctx, opts.OpenTimeout)
	kv, err := openBucket(bctx, js, &opts)
	cancel()
	if err != nil {
		return nil, err
	}
	c := &Cluster{
		opts: opts, nc: nc, kv: kv,
		setSubs: make(chan []string), closing: make(chan context.Context),
		done: make(chan struct{}), leased: make(chan struct{}),
		members: map[string]liveMember{}, owned: map[string]map[int]uint64{},
		subs: slices.Clone(opts.Subscriptions),
	}
	if err := checkAgreement(ctx, kv, &opts); err != nil {
		return nil, err
	}
	c.lease = newLease(kv, opts.Host, &c.opts, memberInfo{Address: opts.Address, Version: opts.Version, Started: opts.Clock.Now(),
		Partitions: opts.Partitions},
		&c.stats, opts.retryEvery())
	// Nothing acts before the loop adopts the first term.
	c.lease.fence = opts.Engine.SetLease
	c.lease.others = c.anotherLive
	c.lease.fence(opts.Clock.Now())
	c.lease.reconnect = func(cause error) {
		if nc.IsConnected() {
			opts.Logger.Warn("cluster: lease renewals failing; moving to another NATS server", "from", nc.ConnectedUrlRedacted(),
				"err", cause)
			_ = nc.ForceReconnect()
		}
	}
	if err := c.join(ctx); err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c.cancel = cancel
	w, err := openWatch(ctx, runCtx, kv, opts.OpenTimeout)
	if err != nil {
		cancel()
		_ = c.lease.leave(ctx)
		return nil, fmt.Errorf("cluster: watch the membership: %w", err)
	}
	go func() {
		defer close(c.leased)
		c.lease.run(runCtx)
	}()
	go c.loop(runCtx, w)
	return c, nil
}

// join creates the lease, waiting while the key is another incarnation's for
// as long as a killed previous run's key can live. A NATS cluster that is
// still forming (a stream with no leader yet: "no response from stream") is
// asked again for as long, within ctx.
func (c *Cluster) join(ctx context.Context) error {
	deadline := c.opts.Clock.Now().Add(c.opts.LeaseTTL + c.opts.renewEvery())
	retryable := func(err error) bool { return errors.Is(err, errInUse) || jsapi.Transient(err) }
	_, err := jsapi.Retry(ctx, retrying(&c.opts, c.opts.Clock), retryable,
		func(ctx context.Context) (struct{}, error) {
			err := c.lease.join(ctx)
			if retryable(err) && !c.opts.Clock.Now().Before(deadline) {
				return struct{}{}, jsapi.Permanent(err)
			}
			return struct{}{}, err
		})
	var gaveUp *jsapi.GaveUp
	if errors.As(err, &gaveUp) {
		return fmt.Errorf("%w (%w)", gaveUp.Err, ctx.Err())
	}
	if err == nil && c.lease.resumed > 0 {
		c.opts.Logger.Warn("cluster: took over the membership of this host's previous run, which stopped without leaving (a crash or a power cut)",
			"host", c.opts.Host)
	}
	return err
}

// loop is the one goroutine that decides: it applies the watcher's view of
// the live set, follows the lease's terms, and reconciles ownership whenever
// either changed (and at every renewal, to retry what failed).
func (c *Cluster) loop(ctx context.Context, w jetstream.KeyWatcher) {
	defer close(c.done)
	o := newOwnership(c)
	live := map[string]liveMember{}
	subs := slices.Clone(c.opts.Subscriptions)
	synced, dirty := false, false
	var term context.Context
	updates := w.Updates()
	heard := c.opts.Clock.Now() // the watcher's last entry, or its start
	// follow adopts the lease's current term, giving up an ended one first.
	follow := func() {
		if term != nil && term.Err() != nil {
			// The engine must stop whatever the context; this one only
			// keeps a hung engine from holding the loop for ever.
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.opts.LeaseTTL)
			o.giveUp(sctx)
			cancel()
			term = nil
		}
		if term == nil {
			if term = c.lease.current(); term != nil {
				c.lease.adopt(term)
			}
		}
	}
	for {
		if dirty && synced && term != nil && term.Err() == nil {
			c.reconcileAll(term, o, live, subs)
			dirty = false
		}
		var ended <-chan struct{}
		if term != nil {
			ended = term.Done()
		}
		select {
		case e, ok := <-updates:
			if !ok {
				// Only a stop ends the watcher's channel; if it was not
				// ours, watch again now or at the next lease change.
				updates, synced = nil, false
				w = c.rewatch(ctx, w, live)
				if w != nil {
					updates, heard = w.Updates(), c.opts.Clock.Now()
				}
				continue
			}
			heard = c.opts.Clock.Now()
			if e == nil {
				synced, dirty = true, true
				continue
			}
			if c.apply(live, e) {
				dirty = true
			}
		case <-c.lease.changed:
			follow()
			dirty = true
			if updates != nil && c.watchStalled(heard) {
				c.opts.Logger.Warn("cluster: the membership watch showed none of this host's own renewals for a lease TTL; watching again",
					"last", heard)
				updates, synced = nil, false
			}
			if updates == nil {
				if w = c.rewatch(ctx, w, live); w != nil {
					updates, heard = w.Updates(), c.opts.Clock.Now()
				}
			}
		case <-ended:
			follow()
			dirty = true
		case s := <-c.setSubs:
			subs, dirty = s, true
		case cctx := <-c.closing:
			o.leave(cctx)
			if w != nil {
				_ = w.Stop()
			}
			return
		}
	}
}

// watchStalled tells whether the membership watcher, whose last entry
// came at heard, has stalled: this host's own renewals, every TTL/3, are
// entries of it too, so none for a TTL while one was confirmed since means
// it delivers nothing. Its consumer may live on a NATS node cut off from
// the others; the client does not always notice, and a host that follows
// a stalled watch neither sees a host's key expire (it never claims that
// host's partitions) nor a host join (TestNetworkFaultsCutIsolateSplitLoss/split).
func (c *Cluster) watchStalled(heard time.Time) bool {
	return c.opts.Clock.Now().Sub(heard) > c.opts.LeaseTTL && c.lease.lastRenewed().After(heard)
}

// rewatch replaces a watcher that ended: a new one replays the live set
// from the start, so the old view is dropped. nil if ctx ended or it
// failed (the next lease change tries again).
func (c *Cluster) rewatch(ctx context.Context, old jetstream.KeyWatcher, live map[string]liveMember) jetstream.KeyWatcher {
	if old != nil {
		_ = old.Stop()
	}
	if ctx.Err() != nil {
		return nil
	}
	w, err := watchMembers(ctx, c.kv)
	if err != nil {
		c.opts.Logger.Warn("cluster: watch the membership", "err", err)
		return nil
	}
	clear(live)
	c.publishMembers(live)
	return w
}

// apply records one watcher entry in live and publishes the view; it
// reports whether ownership may have to change (a host joined, left, or
// released partitions).
func (c *Cluster) apply(live map[string]liveMember, e jetstream.KeyValueEntry) bool {
	defer c.publishMembers(live)
	host, self := e.Key(), e.Key() == c.opts.Host
	if e.Operation() != jetstream.KeyValuePut {
		delete(live, host)
		if self || c.lease.out.Load() {
			// The key expired under this host: renewing finds out at once.
			// Or another host went while this one holds itself out: it
			// may be the last that could take the partitions (stayOut).
			c.lease.kick()
		}
		return !self
	}
	info, err := decodeMember(e.Value())
	if err != nil {
		c.opts.Logger.Warn("cluster: membership", "host", host, "err", err)
	}
	prev, had := live[host]
	live[host] = liveMember{info: info, seen: c.opts.Clock.Now()}
	return !self && (!had || prev.info.Releases != info.Releases || prev.info.Incarnation != info.Incarnation)
}

// reconcileAll reconciles every subscription this host shares out or still
// holds anything of, over the live set and this host.
//
// Whether a host not in the live set is gone is asked of the server once
// per subscription, after that subscription's owners were read: a claim
// from host h at epoch e is safe only if h's key was gone after the claim
// h@e was seen (its lease, and so its fence, had ended), and the claim's
// transaction checks h@e is still the owner. A verdict kept from an
// earlier subscription's reconcile may predate a claim h made since, in a
// term of a new key: taken on it, this host claimed partitions h had just
// claimed and was working on (TestNetworkFaultsPauseFlap/flap,
// calls of host-0 0.3-0.5 s after another host's claim).
func (c *Cluster) reconcileAll(term context.Context, o *ownership, live map[string]liveMember, subs []string) {
	hosts := append(slices.Collect(maps.Keys(live)), c.opts.Host)
	var gone map[string]bool // per subscription
	alive := func(h string) (bool, error) {
		if _, ok := live[h]; ok {
			return true, nil
		}
		if g, ok := gone[h]; ok {
			return !g, nil
		}
		g, err := c.memberGone(term, h)
		if err != nil {
			return true, err
		}
		gone[h] = g
		return !g, nil
	}
	all := slices.Clone(subs)
	all = append(all, slices.Collect(maps.Keys(o.owned))...)
	all = append(all, slices.Collect(maps.Keys(o.unreleased))...)
	for _, sub := range slices.Compact(slices.Sorted(slices.Values(all))) {
		var assigned []string
		if slices.Contains(subs, sub) {
			assigned = Assign(sub, c.opts.Partitions, hosts)
		}
		gone = map[string]bool{}
		o.reconcile(term, sub, assigned, alive)
		if term.Err() != nil {
			return
		}
	}
}

func (c *Cluster) publishMembers(live map[string]liveMember) {
	c.mu.Lock()
	c.members = maps.Clone(live)
	c.mu.Unlock()
}

func (c *Cluster) publishOwned(owned map[string]map[int]uint64) {
	view := make(map[string]map[int]uint64, len(owned))
	for s, ps := range owned {
		view[s] = maps.Clone(ps)
	}
	c.mu.Lock()
	c.owned = view
	c.mu.Unlock()
}

// SetSubscriptions replaces the subscriptions whose partitions are shared
// out: a new one's partitions are claimed, a removed one's are stopped and
// released.
func (c *Cluster) SetSubscriptions(ctx context.Context, names []string) error {
	for _, s := range names {
		if s == "" {
			return fmt.Errorf("%w: an empty subscription name", errOptions)
		}
	}
	names = slices.Clone(names)
	select {
	case c.setSubs <- names:
		c.mu.Lock()
		c.subs = names
		c.mu.Unlock()
		return nil
	case <-c.done:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close leaves the deployment gracefully: it gives up every duty (Duty.Close),
// has the engine stop every partition, releases them in the ledger and
// deletes this host's key, so the others take them at once instead of
// after a TTL.
func (c *Cluster) Close(ctx context.Context) error {
	c.closeOnce.Do(func() {
		dutiesErr := c.closeDuties(ctx)
		defer func() { c.closeErr = errors.Join(dutiesErr, c.closeErr) }()
		select {
		case c.closing <- ctx:
		case <-c.done:
		}
		<-c.done
		c.cancel()
		<-c.leased
		c.closeErr = c.lease.leave(ctx)
	})
	return c.closeErr
}

// Host returns this host's id.
func (c *Cluster) Host() string { return c.opts.Host }

// LeaseValid reports whether this host's lease lets it act now: a term
// adopted and not yet at its end on this host's clock. While it does not,
// the engine starts no handler call (Engine.SetLease) and the host is not
// ready (GET /readyz).
func (c *Cluster) LeaseValid() bool { return c.lease.valid() }

// Stats returns the counters since Open.
func (c *Cluster) Stats() Stats { return c.stats.snapshot() }

// Owned returns what this host owns now: subscription → partition → epoch.
func (c *Cluster) Owned() map[string]map[int]uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]map[int]uint64, len(c.owned))
	for s, ps := range c.owned {
		out[s] = maps.Clone(ps)
	}
	return out
}

// Member is a live host as this host sees it.
type Member struct {
	Host    string
	Address string
	Version string
	Started time.Time
	// Renewed is when this host last saw the member's lease renewed, on
	// this host's clock; LeaseAge is how long ago that was.
	Renewed  time.Time
	LeaseAge time.Duration
	// Self marks this host.
	Self bool
}

// Members returns the live hosts, by id.
func (c *Cluster) Members() []Member {
	now := c.opts.Clock.Now()
	c.mu.Lock()
	live := maps.Clone(c.members)
	c.mu.Unlock()
	out := make([]Member, 0, len(live))
	for _, h := range slices.Sorted(maps.Keys(live)) {
		m := live[h]
		renewed := m.seen
		if h == c.opts.Host {
			renewed = c.lease.lastRenewed()
		}
		out = append(out, Member{Host: h, Address: m.info.Address, Version: m.info.Version, Started: m.info.Started,
			Renewed: renewed, LeaseAge: now.Sub(renewed), Self: h == c.opts.Host})
	}
	return out
}

// Assignment is one partition of a subscription: the host rendezvous
// hashing gives it to over the live hosts, and its owner in the ledger.
// They differ while it moves, or while its owner's lease runs out.
type Assignment struct {
	Subscription string
	Partition    int
	// Host is the live host it is assigned to ("" if none is live).
	Host string
	// Owner and Epoch are its last claim in the ledger ("", 0: never
	// claimed); Released says Owner let it go and nobody claimed it since.
	Owner    string
	Epoch    uint64
	Released bool
}

// Assignments returns every partition of every subscription shared out,
// by subscription and partition, reading the owners from the ledger.
func (c *Cluster) Assignments(ctx context.Context) ([]Assignment, error) {
	c.mu.Lock()
	hosts := slices.Collect(maps.Keys(c.members))
	subs := slices.Sorted(slices.Values(c.subs))
	c.mu.Unlock()
	var out []Assignment
	for _, sub := range slices.Compact(subs) {
		owners, err := c.owners(ctx, sub)
		if err != nil {
			return nil, err
		}
		assigned := Assign(sub, c.opts.Partitions, hosts)
		for p, w := range owners {
			a := Assignment{Subscription: sub, Partition: p, Owner: w.host, Epoch: w.epoch}
			if p < len(assigned) {
				a.Host = assigned[p]
			}
			if isReleased(w.host) {
				a.Owner, a.Released = strings.TrimPrefix(w.host, releasedPrefix), true
			}
			out = append(out, a)
		}
	}
	return out, nil
}
