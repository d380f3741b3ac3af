package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/berthhq/berth/internal/clock"
	"github.com/berthhq/berth/internal/jsapi"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/subscription"
)

// Engine is the part of the host that works on partitions: the subscription
// engine. The cluster tells it, subscription by subscription, which
// partitions this host owns and at which epoch (the epoch of the ledger
// claim, for Tx.Fence in every write the engine makes for that partition).
type Engine interface {
	// Own makes owned (partition → epoch) the partitions of subscription the
	// engine works on. Before it returns, every partition not in owned must
	// have stopped — no write for it in flight or to come — even when it
	// returns an error or ctx ends: the cluster releases those partitions
	// to other hosts next. An error reports what could not be started.
	Own(ctx context.Context, subscription string, owned map[int]uint64) error
	// SetLease tells the engine until when, on the cluster's clock, this
	// host's lease lets it act: from then on it must start no handler call
	// for any partition, at once and without waiting for Own, until a later
	// SetLease moves the time on. The cluster calls it with each confirmed
	// renewal of the term the engine's partitions were given in, and with
	// a time already past when the term ends or before one begins.
	SetLease(until time.Time)
}

// Defaults of Options.
const (
	// DefaultLeaseTTL is the default Options.LeaseTTL.
	DefaultLeaseTTL = 15 * time.Second
	// DefaultBucket is the default Options.Bucket.
	DefaultBucket = "berth_members"
	// DefaultPartitions is the default Options.Partitions: the engine's,
	// which every host must agree on.
	DefaultPartitions = subscription.DefaultPartitions
)

// Options configure a Cluster. Zero values take the defaults named.
type Options struct {
	// Host is this host's id, unique in the deployment and the same across
	// its restarts: letters, digits, '-' and '_'. Required.
	Host string
	// Address is where this host's REST API is reached, shown to the others.
	Address string
	// Version is the host's build version, shown to the others.
	Version string
	// Ledger is the shared ledger the partitions are claimed in. Required.
	Ledger ledger.Store
	// Engine is told which partitions this host owns. Required.
	Engine Engine
	// Subscriptions are the subscriptions whose partitions are shared out;
	// SetSubscriptions changes them later.
	Subscriptions []string
	// Partitions is the number of partitions of every subscription; it must
	// match the engine's and be the same on every host. Default 16.
	Partitions int
	// LeaseTTL is how long a host's membership lasts without a renewal; it
	// is renewed every LeaseTTL/3. It is the membership bucket's TTL, so
	// every host must use the same (Open fails otherwise). At least 1 s.
	// Default DefaultLeaseTTL (15 s).
	LeaseTTL time.Duration
	// Resume is the incarnation of this host's previous run, as Joined last
	// told it (the caller keeps it beside its data, which one process at a
	// time may hold): a membership key still held by that incarnation is
	// taken over at once, since that run is over — stopped without leaving
	// (a crash, a power cut) — rather than waited out for up to LeaseTTL.
	// Empty: wait, as for any key of another incarnation.
	Resume string
	// Joined, if set, is called with this host's incarnation each time it
	// joins (creates or takes over its key), before its term is used, for
	// the caller to keep as the next run's Resume.
	Joined func(incarnation string)
	// Margin is how long before its lease could expire on the server a host
	// that could not renew gives up its partitions: it must cover the
	// engine's stopping them and the drift between this host's clock and
	// the server's over one TTL. At most LeaseTTL/2. Default LeaseTTL/5.
	Margin time.Duration
	// Bucket is the JetStream KV bucket of the membership. Default
	// "berth_members".
	Bucket string
	// Replicas of the membership bucket when this host creates it: 1, or 3
	// on a three-node NATS cluster. Default 1.
	Replicas int
	// OpenTimeout bounds how long Open asks for the membership bucket while
	// the NATS cluster cannot answer yet (forming, electing its leader,
	// other hosts creating it at the same moment: internal/jsapi). It does
	// not bound the wait for a previous run's key to expire (up to a
	// LeaseTTL). Default 30 s.
	OpenTimeout time.Duration
	// Clock is the source of time of the lease (renewals, the give-up
	// deadline, lease ages). Default clock.Real().
	Clock clock.Clock
	// Logger receives the cluster's log. Default: discarded.
	Logger *slog.Logger
}

// hostID is what a host id may be: a single KV key token, with no ':' (the
// released marker's separator) and no '.' (a subject separator).
var hostID = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// errOptions wraps every problem with Options.
var errOptions = errors.New("cluster: options")

func (o *Options) defaults() error {
	if o.Partitions == 0 {
		o.Partitions = DefaultPartitions
	}
	if o.LeaseTTL == 0 {
		o.LeaseTTL = DefaultLeaseTTL
	}
	if o.Margin == 0 {
		o.Margin = o.LeaseTTL / 5
	}
	if o.Bucket == "" {
		o.Bucket = DefaultBucket
	}
	if o.Replicas == 0 {
		o.Replicas = 1
	}
	if o.OpenTimeout == 0 {
		o.OpenTimeout = jsapi.DefaultWait
	}
	if o.Clock == nil {
		o.Clock = clock.Real()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case !hostID.MatchString(o.Host):
		return fmt.Errorf("%w: host id %q must be letters, digits, '-' and '_'", errOptions, o.Host)
	case o.Ledger == nil:
		return fmt.Errorf("%w: no ledger", errOptions)
	case o.Engine == nil:
		return fmt.Errorf("%w: no engine", errOptions)
	case o.Partitions < 0:
		return fmt.Errorf("%w: %d partitions", errOptions, o.Partitions)
	case o.LeaseTTL < time.Second:
		return fmt.Errorf("%w: lease TTL %v is under 1s (the server's least TTL)", errOptions, o.LeaseTTL)
	case o.Margin < 0 || o.Margin > o.LeaseTTL/2:
		return fmt.Errorf("%w: margin %v must be between 0 and half the lease TTL %v", errOptions, o.Margin, o.LeaseTTL)
	case o.Replicas < 1 || o.Replicas > 5:
		return fmt.Errorf("%w: %d replicas of the membership bucket (1 to 5)", errOptions, o.Replicas)
	}
	for _, s := range o.Subscriptions {
		if s == "" {
			return fmt.Errorf("%w: an empty subscription name", errOptions)
		}
	}
	return nil
}

// renewEvery is how often the lease is renewed: three chances within a TTL.
func (o *Options) renewEvery() time.Duration { return o.LeaseTTL / 3 }

// renewTimeout is how long one renewal may take before it counts as
// failed: half the time between renewals, far more than a healthy
// cluster takes, and short enough that a host on a server cut off from
// the majority learns it with time left to move (lease.run).
func (o *Options) renewTimeout() time.Duration { return o.LeaseTTL / 6 }

// retryEvery is how soon a failed renewal is tried again, and the pause of
// every other ask-again of the cluster's (retrying): never shorter than
// jsapi.FirstPause.
func (o *Options) retryEvery() time.Duration { return max(o.LeaseTTL/20, jsapi.FirstPause) }

// retrying is the policy of the cluster's loops that ask NATS again (the
// membership bucket, the ledger on JetStream, a forwarded call): a pause
// of retryEvery on clock between tries, until the context ends.
func retrying(o *Options, clk clock.Clock) jsapi.Policy {
	p := jsapi.Every(o.retryEvery())
	p.Clock = clk
	return p
}
