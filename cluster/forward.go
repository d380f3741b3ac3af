package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/internal/clock"
	"github.com/berthhq/berth/internal/jsapi"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/subscription"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// ForwarderOptions configure a Forwarder. Zero values take the defaults
// named.
type ForwarderOptions struct {
	// Deployment is the deployment's name S (its event stream's): calls go
	// to S_OPS.<host-id>, broadcasts to S_OPS.all. Required.
	Deployment string
	// Wait bounds a call whose context has no deadline (server.operator-wait,
	// read at each call so that a reload applies). Default 10 s.
	Wait func() time.Duration
	// Tries is how often a call is made while the partition's owner changes
	// under it, or a reset while partitions change hands. Default 3.
	Tries int
	// Clock paces the retries and ends holds nobody lifted. Default the
	// Cluster's.
	Clock clock.Clock
	// Logger default: the Cluster's.
	Logger *slog.Logger
}

// Forwarder makes the operator calls on a host of a cluster act as they do
// on a single host (it is a subscription.Operator): a resume or skip of an
// aggregate whose partition another host owns is made there, with the same
// result; a pause, unpause or pause until is stored and applied on every
// host that owns a partition; a reset holds the subscription on every host,
// writes the checkpoints and lets them all go on from there. It also answers
// the other hosts' calls on this one (a NATS micro service, berth_ops).
type Forwarder struct {
	eng  *subscription.Engine
	c    *Cluster
	nc   *nats.Conn
	opts ForwarderOptions
	svc  micro.Service
	subj string // S_OPS.

	ctx    context.Context // the responder's lifetime; cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // calls being answered

	mu      sync.Mutex
	holds   map[holdKey]clock.Timer // other hosts' resets holding this one
	closing bool                    // Close began: calls are answered ErrClosed
}

var _ subscription.Operator = (*Forwarder)(nil)

// NewForwarder returns the forwarder of this host — eng its engine, c its
// place in the cluster, nc its NATS connection — and starts answering the
// other hosts' calls. Close stops that.
func NewForwarder(eng *subscription.Engine, c *Cluster, nc *nats.Conn, opts ForwarderOptions) (*Forwarder, error) {
	if eng == nil || c == nil || nc == nil {
		return nil, fmt.Errorf("%w: a forwarder needs the engine, the cluster and a NATS connection", errOptions)
	}
	if opts.Deployment == "" {
		return nil, fmt.Errorf("%w: a forwarder needs the deployment's name", errOptions)
	}
	if opts.Wait == nil {
		opts.Wait = func() time.Duration { return 10 * time.Second }
	}
	if opts.Tries <= 0 {
		opts.Tries = 3
	}
	if opts.Clock == nil {
		opts.Clock = c.opts.Clock
	}
	if opts.Logger == nil {
		opts.Logger = c.opts.Logger
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &Forwarder{eng: eng, c: c, nc: nc, opts: opts, subj: opts.Deployment + opsSuffix + ".",
		ctx: ctx, cancel: cancel, holds: map[holdKey]clock.Timer{}}
	if err := f.serve(); err != nil {
		cancel()
		return nil, err
	}
	return f, nil
}

// Subscriptions names this host's subscriptions (every host has the same,
// from the shared module store).
func (f *Forwarder) Subscriptions() []string { return f.eng.Subscriptions() }

// Resume resumes a parked aggregate wherever its partition is owned, as
// subscription.Engine.Resume does on a single host.
func (f *Forwarder) Resume(ctx context.Context, sub, aggregateType, aggregateID string, by subscription.Caller) error {
	c := opCall{Op: opResume, Subscription: sub, AggregateType: aggregateType, AggregateID: aggregateID, Actor: by.Actor, Reason: by.Reason}
	return f.onOwner(ctx, c, func(ctx context.Context) error {
		return f.eng.Resume(ctx, sub, aggregateType, aggregateID, by)
	})
}

// Skip skips a parked aggregate's held events wherever its partition is
// owned, as subscription.Engine.Skip does on a single host.
func (f *Forwarder) Skip(ctx context.Context, sub, aggregateType, aggregateID string, throughVersion uint64, by subscription.Caller) error {
	c := opCall{Op: opSkip, Subscription: sub, AggregateType: aggregateType, AggregateID: aggregateID,
		Through: throughVersion, Actor: by.Actor, Reason: by.Reason}
	return f.onOwner(ctx, c, func(ctx context.Context) error {
		return f.eng.Skip(ctx, sub, aggregateType, aggregateID, throughVersion, by)
	})
}

// bound gives ctx the forwarder's wait when it has no deadline.
func (f *Forwarder) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, f.opts.Wait())
}

// remaining is what is left of ctx's deadline for the callee: nine tenths,
// so that its answer (a busy aggregate, say) arrives before the caller
// gives up.
func remaining(ctx context.Context) time.Duration {
	d, _ := ctx.Deadline()
	return time.Until(d) * 9 / 10
}

// onOwner makes the call here when this host works on the aggregate's
// partition, else on the host the ledger names its owner; when the owner
// changes under the call (ErrNotOwned, a host gone) it looks again, up to
// Tries times within ctx, a pause of the lease's retry interval apart
// (jsapi.Retry, on the forwarder's Clock).
func (f *Forwarder) onOwner(ctx context.Context, c opCall, local func(context.Context) error) error {
	ctx, cancel := f.bound(ctx)
	defer cancel()
	p := retrying(&f.c.opts, f.opts.Clock)
	p.Attempts = f.opts.Tries
	_, err := jsapi.Retry(ctx, p, jsapi.Always, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, f.tryOnOwner(ctx, c, local)
	})
	var gaveUp *jsapi.GaveUp
	if !errors.As(err, &gaveUp) {
		return err
	}
	last := gaveUp.Err
	if ctx.Err() != nil {
		return fmt.Errorf("%w: %s/%s of %q: no answer in time from its owner (%v)", ErrUnreachable,
			c.AggregateType, c.AggregateID, c.Subscription, last)
	}
	if errors.Is(last, nats.ErrNoResponders) {
		return fmt.Errorf("%w: %s/%s of %q: its owner does not answer (a host that is down loses its partitions within twice the lease TTL; try again then)",
			ErrUnreachable, c.AggregateType, c.AggregateID, c.Subscription)
	}
	return fmt.Errorf("%w (tried %d times; its partition is moving between hosts: try again)", last, f.opts.Tries)
}

// tryOnOwner is one try of onOwner: nil, an error worth another try (the
// partition changing hands, its owner gone or closing or holding for a
// reset) or one marked jsapi.Permanent.
func (f *Forwarder) tryOnOwner(ctx context.Context, c opCall, local func(context.Context) error) error {
	err := local(ctx)
	if !errors.Is(err, subscription.ErrNotOwned) {
		return jsapi.Permanent(err)
	}
	owner, p, oerr := f.ownerOf(ctx, c)
	switch {
	case oerr != nil && ctx.Err() != nil:
		return err // the time is up: onOwner says so, with this try's ErrNotOwned
	case oerr != nil:
		return jsapi.Permanent(oerr)
	case owner == "" || owner == f.c.Host():
		// Released and not claimed again yet, or claimed by this host
		// and not yet started here: it lands in a moment.
		return fmt.Errorf("%w: partition %d of %q is changing hands", subscription.ErrNotOwned, p, c.Subscription)
	}
	err = f.ask(ctx, owner, c)
	switch {
	case errors.Is(err, subscription.ErrNotOwned), errors.Is(err, nats.ErrNoResponders),
		errors.Is(err, subscription.ErrClosed): // the owner closing, or holding for a reset
		return err
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		return jsapi.Permanent(fmt.Errorf("%w: host %s owns partition %d of %q and did not answer in time; the %s may have taken effect there (look at the parked record)",
			ErrUnreachable, owner, p, c.Subscription, c.Op))
	}
	return jsapi.Permanent(err)
}

// ownerOf returns the ledger owner of the call's aggregate's partition (""
// when released) and the partition.
func (f *Forwarder) ownerOf(ctx context.Context, c opCall) (string, int, error) {
	p := eventlog.PartitionOf(c.AggregateType, c.AggregateID, f.c.opts.Partitions)
	var host string
	err := f.c.opts.Ledger.View(ctx, func(tx ledger.Tx) error {
		var err error
		host, _, err = tx.PartitionOwner(c.Subscription, p)
		return err
	})
	if err != nil {
		return "", p, fmt.Errorf("cluster: owner of partition %d of %q: %w", p, c.Subscription, err)
	}
	if isReleased(host) {
		host = ""
	}
	return host, p, nil
}

// ask makes the call on host and returns its answer: nil, or the error it
// answered with (the same sentinel as the engine's), or the request's.
func (f *Forwarder) ask(ctx context.Context, host string, c opCall) error {
	c.WaitMS = remaining(ctx).Milliseconds()
	m, err := f.nc.RequestMsgWithContext(ctx, &nats.Msg{Subject: f.subj + host, Data: encodeCall(c)})
	if err != nil {
		return err
	}
	if err := replyError(m); err != nil {
		f.opts.Logger.Info("operator call answered by another host", "op", c.Op, "host", host, "subscription", c.Subscription, "err", err)
		return err
	}
	return nil
}
