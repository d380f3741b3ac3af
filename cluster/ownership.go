package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/berthhq/berth/ledger"
)

// releasedPrefix marks a partition its owner let go: a graceful release
// claims it at the next epoch for "released:<host>", a name no host can have
// (host ids have no ':'), so the next owner may claim it at once — and the
// releasing host's own late writes at its old epoch are fenced by the
// ledger, not only by its engine having stopped.
const releasedPrefix = "released:"

func releasedBy(host string) string { return releasedPrefix + host }

// isReleased tells whether a ledger owner is a release marker.
func isReleased(owner string) bool { return strings.HasPrefix(owner, releasedPrefix) }

// claim is a partition's owner in the ledger.
type claim struct {
	host  string
	epoch uint64
}

// errChanged means a partition's owner changed between the look and the
// claim: another host was quicker.
var errChanged = errors.New("cluster: owner changed")

// ownership is what this host holds; only the Cluster's loop goroutine
// touches it.
type ownership struct {
	c *Cluster
	// owned is what the engine was last told it owns, per subscription.
	owned map[string]map[int]uint64
	// unreleased holds partitions the engine stopped (or never ran) that the
	// ledger still shows as this host's, until a release lands.
	unreleased map[string]map[int]uint64
	releases   uint64
}

func newOwnership(c *Cluster) *ownership {
	return &ownership{c: c, owned: map[string]map[int]uint64{}, unreleased: map[string]map[int]uint64{}}
}

// owners reads the ledger owner of every partition of sub.
func (c *Cluster) owners(ctx context.Context, sub string) ([]claim, error) {
	return readOwners(ctx, c.opts.Ledger, sub, c.opts.Partitions)
}

// readOwners reads the owners of partitions 0 to n-1 of sub in one View.
func readOwners(ctx context.Context, st ledger.Store, sub string, n int) ([]claim, error) {
	out := make([]claim, n)
	err := st.View(ctx, func(tx ledger.Tx) error {
		for p := range out {
			h, e, err := tx.PartitionOwner(sub, p)
			if err != nil {
				return err
			}
			out[p] = claim{h, e}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cluster: owners of %q: %w", sub, err)
	}
	return out, nil
}

// reconcile brings sub's partitions in line with assigned (the host of each
// partition): it stops and releases what is no longer this host's, drops
// what another host claimed, and claims what is this host's and free. It
// runs within a term (ctx ends with it) and hosts a consistent view.
func (o *ownership) reconcile(ctx context.Context, sub string, assigned []string, alive func(string) (bool, error)) {
	c, self := o.c, o.c.opts.Host
	owners, err := c.owners(ctx, sub)
	if err != nil {
		c.opts.Logger.Warn("cluster: reconcile", "subscription", sub, "err", err)
		return
	}
	mine := func(p int) bool { return p < len(assigned) && assigned[p] == self }

	// Stop what was claimed away or is another host's now, before any
	// release: the engine must be done with a partition before it goes.
	held := o.owned[sub]
	keep := make(map[int]uint64, len(held))
	for p, e := range held {
		switch {
		case owners[p] != claim{self, e}:
			c.stats.lost.Add(1)
			c.opts.Logger.Warn("cluster: partition claimed by another host", "subscription", sub, "partition", p,
				"owner", owners[p].host, "epoch", owners[p].epoch, "held", e)
		case !mine(p):
			o.unrelease(sub, p, e)
		default:
			keep[p] = e
		}
	}
	if len(keep) != len(held) {
		o.own(ctx, sub, keep)
	}
	// The ledger may name this host for partitions it does not run: left
	// from a term it gave up, or from its previous run.
	for p, w := range owners {
		if _, ok := keep[p]; !ok && w.host == self && !mine(p) {
			o.unrelease(sub, p, w.epoch)
		}
	}
	o.release(ctx, sub)

	claimed := maps.Clone(keep)
	for p, w := range owners {
		if _, ok := keep[p]; ok || !mine(p) {
			continue
		}
		if free, err := o.free(w, alive); err != nil || !free {
			continue
		}
		e, err := o.claim(ctx, sub, p, w)
		switch {
		case errors.Is(err, errChanged) || errors.Is(err, ledger.ErrFenced):
			c.stats.claimConflicts.Add(1)
		case err != nil:
			c.opts.Logger.Warn("cluster: claim", "subscription", sub, "partition", p, "err", err)
		default:
			claimed[p] = e
			delete(o.unreleased[sub], p)
		}
	}
	if len(claimed) != len(keep) {
		o.own(ctx, sub, claimed)
	}
}

// free tells whether a partition whose ledger owner is w may be claimed:
// never claimed, released, this host's own (from a term it gave up or its
// previous run), or its owner's lease is gone on the server.
func (o *ownership) free(w claim, alive func(string) (bool, error)) (bool, error) {
	switch {
	case w.host == "", isReleased(w.host), w.host == o.c.opts.Host:
		return true, nil
	}
	live, err := alive(w.host)
	return !live, err
}

// claim claims partition p at the epoch after w's, if w is still its owner.
func (o *ownership) claim(ctx context.Context, sub string, p int, w claim) (uint64, error) {
	c := o.c
	err := c.opts.Ledger.Update(ctx, func(tx ledger.Tx) error {
		h, e, err := tx.PartitionOwner(sub, p)
		if err != nil {
			return err
		}
		if (claim{h, e}) != w {
			return errChanged
		}
		return tx.ClaimPartition(sub, p, c.opts.Host, e+1)
	})
	if err != nil {
		return 0, err
	}
	c.stats.claims.Add(1)
	c.opts.Logger.Info("cluster: claimed", "subscription", sub, "partition", p, "epoch", w.epoch+1, "from", w.host)
	return w.epoch + 1, nil
}

func (o *ownership) unrelease(sub string, p int, epoch uint64) {
	if o.unreleased[sub] == nil {
		o.unreleased[sub] = map[int]uint64{}
	}
	o.unreleased[sub][p] = epoch
}

// release marks sub's unreleased partitions released in the ledger, in one
// transaction; those another host claimed meanwhile need nothing. On failure
// they stay for the next reconcile: the host that should have them waits for
// the release (this host is alive), so it must land eventually.
func (o *ownership) release(ctx context.Context, sub string) {
	ps := o.unreleased[sub]
	if len(ps) == 0 {
		return
	}
	c, n := o.c, 0
	err := c.opts.Ledger.Update(ctx, func(tx ledger.Tx) error {
		n = 0
		for _, p := range slices.Sorted(maps.Keys(ps)) {
			h, e, err := tx.PartitionOwner(sub, p)
			if err != nil {
				return err
			}
			if h != c.opts.Host || e != ps[p] {
				continue
			}
			if err := tx.ClaimPartition(sub, p, releasedBy(c.opts.Host), e+1); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		c.opts.Logger.Warn("cluster: release", "subscription", sub, "err", err)
		return
	}
	delete(o.unreleased, sub)
	if n > 0 {
		c.stats.releases.Add(uint64(n))
		o.releases += uint64(n)
		c.lease.released(o.releases)
		c.opts.Logger.Info("cluster: released", "subscription", sub, "partitions", n)
	}
}

// own tells the engine what it owns of sub now and keeps it as held.
func (o *ownership) own(ctx context.Context, sub string, owned map[int]uint64) {
	if len(owned) == 0 {
		delete(o.owned, sub)
	} else {
		o.owned[sub] = owned
	}
	told := maps.Clone(owned)
	if told == nil {
		told = map[int]uint64{}
	}
	if err := o.c.opts.Engine.Own(ctx, sub, told); err != nil {
		o.c.stats.engineErrors.Add(1)
		o.c.opts.Logger.Warn("cluster: engine", "subscription", sub, "err", err)
	}
	o.c.publishOwned(o.owned)
}

// giveUp stops every partition without a release: the term ended, so the
// others may soon claim them, and the ledger may be out of reach anyway.
// The engine stopped calling handlers at the term's end already (the lease
// fence, Engine.SetLease); here every subscription is stopped at once, not
// one after another, since each stop writes a final checkpoint and may wait
// on a ledger that does not answer (ctx bounds it). What the ledger still
// shows as this host's is released or claimed again in a later term.
func (o *ownership) giveUp(ctx context.Context) {
	if len(o.owned) == 0 {
		clear(o.unreleased)
		return
	}
	c := o.c
	c.stats.giveUps.Add(1)
	c.opts.Logger.Warn("cluster: lease term ended; giving up partitions", "subscriptions", len(o.owned))
	subs := slices.Sorted(maps.Keys(o.owned))
	errs := make([]error, len(subs))
	var wg sync.WaitGroup
	for i, sub := range subs {
		wg.Go(func() { errs[i] = c.opts.Engine.Own(ctx, sub, map[int]uint64{}) })
	}
	wg.Wait()
	for i, sub := range subs {
		delete(o.owned, sub)
		if errs[i] != nil {
			c.stats.engineErrors.Add(1)
			c.opts.Logger.Warn("cluster: engine", "subscription", sub, "err", errs[i])
		}
	}
	c.publishOwned(o.owned)
	clear(o.unreleased)
}

// leave stops and releases everything, for a graceful Close.
func (o *ownership) leave(ctx context.Context) {
	for _, sub := range slices.Sorted(maps.Keys(o.owned)) {
		held := o.owned[sub]
		o.own(ctx, sub, nil)
		for p, e := range held {
			o.unrelease(sub, p, e)
		}
	}
	for _, sub := range slices.Sorted(maps.Keys(o.unreleased)) {
		o.release(ctx, sub)
	}
}
