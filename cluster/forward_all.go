package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/subscription"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"
)

// Pause pauses a subscription on every host: stored in the ledger, applied
// here, and applied by every host that owns a partition of it before Pause
// returns. A host that starts later reads it from the ledger.
func (f *Forwarder) Pause(ctx context.Context, sub string, by subscription.Caller) error {
	return f.everywhere(ctx, sub, func(ctx context.Context) error { return f.eng.Pause(ctx, sub, by) })
}

// PauseUntil pauses a subscription on every host until the time given, as
// Pause does; each host ends it on its own clock.
func (f *Forwarder) PauseUntil(ctx context.Context, sub string, until time.Time, by subscription.Caller) error {
	return f.everywhere(ctx, sub, func(ctx context.Context) error { return f.eng.PauseUntil(ctx, sub, until, by) })
}

// Unpause lets a paused subscription go on, on every host, as Pause does.
func (f *Forwarder) Unpause(ctx context.Context, sub string, by subscription.Caller) error {
	return f.everywhere(ctx, sub, func(ctx context.Context) error { return f.eng.Unpause(ctx, sub, by) })
}

// everywhere makes a change of the pause state: local stores and applies
// it here; then every other host is told to apply what the ledger holds —
// the stored state, not the message, so two operators' calls crossing end
// the same on every host: the last stored. It waits for the hosts that own
// a partition in the ledger once the change is stored (a host that claims
// one later starts from the stored state).
func (f *Forwarder) everywhere(ctx context.Context, sub string, local func(context.Context) error) error {
	ctx, cancel := f.bound(ctx)
	defer cancel()
	if err := local(ctx); err != nil {
		return err
	}
	need, err := f.otherOwners(ctx, sub)
	if err != nil {
		return fmt.Errorf("%w: stored and in force here, but the hosts to tell are unknown: %w", ErrUnconfirmed, err)
	}
	if len(need) == 0 {
		return nil
	}
	got := f.broadcast(ctx, opCall{Op: opRefreshPause, Subscription: sub}, need)
	applied := func(h string) bool {
		err, ok := got[h]
		// A host without the subscription, or closing, delivers none of it.
		return ok && (err == nil || errors.Is(err, subscription.ErrUnknownSubscription) || errors.Is(err, subscription.ErrClosed))
	}
	if missing := without(need, applied); len(missing) > 0 {
		return fmt.Errorf("%w: the pause state of %q is stored and in force on this host, but %s did not confirm it; a host that cannot be reached loses its partitions within twice the lease TTL and their next owner starts from the stored state",
			ErrUnconfirmed, sub, missing)
	}
	return nil
}

// Reset moves every partition's checkpoint of a subscription to position,
// as subscription.Engine.Reset does on a single host, without racing the
// runs of other hosts: it holds the subscription here and on every host
// (each stops its run and writes its checkpoints), writes the checkpoints
// and the subscription's OnReset in one transaction that fails if a partition's
// owner in the ledger is not holding, and lifts the holds, after which every
// host starts again from the checkpoints written. A partition that changed
// hands meanwhile (its new owner was not holding) makes it hold again, up
// to Tries times. If an owner does not hold in time, nothing changes:
// ErrUnconfirmed. A hold lasts twice the time left, so a host whose resetter
// died goes on by itself.
func (f *Forwarder) Reset(ctx context.Context, sub string, position uint64, by subscription.Caller) error {
	ctx, cancel := f.bound(ctx)
	defer cancel()
	id := f.c.Host() + "-" + nuid.Next()
	holdFor := 2 * remaining(ctx)
	if err := f.eng.Hold(ctx, sub, id); err != nil {
		return err
	}
	held := map[string]bool{}
	defer f.unholdAll(sub, id, held)
	for try := 1; ; try++ {
		need, err := f.otherOwners(ctx, sub)
		if err != nil {
			return err
		}
		holding := func(h string) bool { return held[h] }
		if missing := without(need, holding); len(missing) > 0 {
			hold := opCall{Op: opHold, Subscription: sub, Hold: id, WaitMS: holdFor.Milliseconds()}
			for h, err := range f.broadcast(ctx, hold, missing) {
				if err == nil {
					held[h] = true
				}
			}
			if missing := without(need, holding); len(missing) > 0 {
				return fmt.Errorf("%w: the reset of %q changed nothing: %s own partitions of it and did not stop for the reset",
					ErrUnconfirmed, sub, missing)
			}
		}
		err = f.eng.ResetHeld(ctx, sub, position, f.allHolding(sub, held), by)
		var moved *notHolding
		if !errors.As(err, &moved) {
			return err
		}
		if try == f.opts.Tries {
			return fmt.Errorf("%w: the reset of %q changed nothing: partitions kept changing hands (%v, after %d tries)",
				ErrUnconfirmed, sub, err, try)
		}
		f.opts.Logger.Info("reset: a partition changed hands while the others held; holding again",
			"subscription", sub, "partition", moved.partition, "owner", moved.host)
	}
}

// notHolding fails a reset's write: a partition's owner is not holding.
type notHolding struct {
	host      string
	partition int
}

func (e *notHolding) Error() string {
	return fmt.Sprintf("cluster: partition %d is owned by host %s, which is not holding for the reset", e.partition, e.host)
}

// allHolding is the reset's guard: every partition's owner in the ledger is
// this host, a host holding, or none (released or never claimed). Read in
// the reset's transaction, so a claim that lands after it starts from the
// checkpoints written.
func (f *Forwarder) allHolding(sub string, held map[string]bool) func(ledger.Tx) error {
	return func(tx ledger.Tx) error {
		for p := range f.c.opts.Partitions {
			h, _, err := tx.PartitionOwner(sub, p)
			if err != nil {
				return err
			}
			if h != "" && !isReleased(h) && h != f.c.Host() && !held[h] {
				return &notHolding{host: h, partition: p}
			}
		}
		return nil
	}
}

// unholdAll lifts a reset's hold here and on every host, waiting (a while
// of its own: the reset's context may have ended) for those known to hold.
func (f *Forwarder) unholdAll(sub, id string, held map[string]bool) {
	ctx, cancel := context.WithTimeout(context.Background(), f.opts.Wait())
	defer cancel()
	if err := f.eng.Unhold(ctx, sub, id); err != nil {
		f.opts.Logger.Error("reset: starting the subscription again failed", "subscription", sub, "err", err)
	}
	need := slices.Collect(maps.Keys(held))
	got := f.broadcast(ctx, opCall{Op: opUnhold, Subscription: sub, Hold: id}, need)
	for _, h := range need {
		if err, ok := got[h]; !ok || err != nil {
			f.opts.Logger.Warn("reset: a host did not confirm the end of the hold; it ends it itself when the hold expires",
				"subscription", sub, "host", h, "err", err)
		}
	}
}

// otherOwners returns the hosts other than this one that own a partition
// of sub in the ledger.
func (f *Forwarder) otherOwners(ctx context.Context, sub string) ([]string, error) {
	owners, err := f.c.owners(ctx, sub)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, w := range owners {
		if w.host != "" && !isReleased(w.host) && w.host != f.c.Host() && !slices.Contains(out, w.host) {
			out = append(out, w.host)
		}
	}
	slices.Sort(out)
	return out, nil
}

// broadcast sends c to every host on S_OPS.all and gathers the answers —
// host → its error, nil for done — until every host of need answered or
// ctx ended. Others' answers count too, as they come.
func (f *Forwarder) broadcast(ctx context.Context, c opCall, need []string) map[string]error {
	got := map[string]error{}
	if c.WaitMS == 0 {
		c.WaitMS = remaining(ctx).Milliseconds()
	}
	inbox := f.nc.NewRespInbox()
	s, err := f.nc.SubscribeSync(inbox)
	if err != nil {
		f.opts.Logger.Warn("operator broadcast", "op", c.Op, "err", err)
		return got
	}
	defer s.Unsubscribe()
	m := nats.NewMsg(f.subj + opsAll)
	m.Reply, m.Data = inbox, encodeCall(c)
	m.Header.Set(headerFrom, f.c.Host())
	if err := f.nc.PublishMsg(m); err != nil {
		f.opts.Logger.Warn("operator broadcast", "op", c.Op, "err", err)
		return got
	}
	answered := func(h string) bool { _, ok := got[h]; return ok }
	for len(without(need, answered)) > 0 {
		r, err := s.NextMsgWithContext(ctx)
		if err != nil {
			return got
		}
		host := r.Header.Get(headerHost)
		got[host] = replyError(r)
		if got[host] != nil {
			f.opts.Logger.Warn("operator broadcast answered with an error", "op", c.Op, "host", host,
				"subscription", c.Subscription, "err", got[host])
		}
	}
	return got
}

// hostList names hosts for a message: "host h2", "hosts h2, h3".
type hostList []string

func (l hostList) String() string {
	if len(l) == 1 {
		return "host " + l[0]
	}
	return "hosts " + strings.Join(l, ", ")
}

// without returns the hosts of need that ok does not accept.
func without(need []string, ok func(host string) bool) hostList {
	var out hostList
	for _, h := range need {
		if !ok(h) {
			out = append(out, h)
		}
	}
	return out
}
