package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/berthhq/berth/api/wire"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func (a *app) clusterCmd() *cobra.Command {
	c := a.verb("cluster", "Show the deployment's hosts, their leases, and which host owns each partition", 0, clusterFlags, clusterShow)
	c.Long = clusterHelp
	return c
}

// clusterHelp is `berth cluster --help`'s text above the usage.
const clusterHelp = `Show the deployment the host belongs to (GET /v1/cluster).

With store.backend "jetstream" several hosts share the partitions: this lists the live hosts
with their lease ages (a lease renews every third of cluster.lease-ttl; a host whose lease
runs out has left), then per subscription how many partitions each host owns. A partition
no live host owns is listed under UNOWNED with its state: released (its owner let it go and
the next has not claimed it yet), orphaned (its owner's lease ran out and no other host has
claimed it yet) or unclaimed (never claimed). --partitions lists every partition.

A single host says so in one line: it owns every partition.`

func clusterFlags(fs *pflag.FlagSet, o *options) {
	fs.BoolVar(&o.partitions, "partitions", false, "list every partition with its owner, epoch and assigned host")
}

// clusterShow prints GET /v1/cluster: a line on the deployment, the hosts,
// then per subscription how many partitions each host owns and which are
// unowned (every partition with --partitions).
func clusterShow(x *invocation, _ []string) error {
	raw, err := x.client.get(x.ctx, apiPath("cluster"), nil)
	var c wire.Cluster
	if done, err := x.decoded(raw, err, &c); done || err != nil {
		return err
	}
	if c.Mode == wire.ClusterModeSingle {
		fmt.Fprintf(x.stdout, "single host %s: it owns all %d partitions of every subscription (store.backend is not \"jetstream\")\n",
			c.Host, c.Partitions)
		return nil
	}
	owned := "every partition owned"
	if c.Unowned > 0 {
		owned = fmt.Sprintf("%d %s unowned", c.Unowned, plural(c.Unowned, "partition"))
	}
	fmt.Fprintf(x.stdout, "%d %s, seen from %s: lease TTL %s, %d partitions per subscription; %s\n\n",
		len(c.Hosts), plural(len(c.Hosts), "host"), c.Host, c.LeaseTTL, c.Partitions, owned)

	t := x.table("HOST", "ADDRESS", "VERSION", "JOINED", "LEASE AGE", "OWNS")
	for _, h := range c.Hosts {
		id := h.ID
		if h.Self {
			id += " (this host)"
		}
		t.row(id, orDash(h.Address), orDash(h.Version), relative(h.Joined, x.now), orDash(h.LeaseAge), strconv.Itoa(h.Owned))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if len(c.Subscriptions) == 0 {
		fmt.Fprintln(x.stdout, "\nno subscriptions (push a module to add some)")
		return nil
	}

	fmt.Fprintln(x.stdout)
	header := []string{"SUBSCRIPTION"}
	for _, h := range c.Hosts {
		header = append(header, h.ID) // a name, as it is
	}
	t = x.table(append(header, "UNOWNED")...)
	for _, s := range c.Subscriptions {
		row := []string{s.Name}
		for _, h := range c.Hosts {
			n := 0
			for _, p := range s.Partitions {
				if p.State == wire.PartitionOwned && p.Owner == h.ID {
					n++
				}
			}
			row = append(row, strconv.Itoa(n))
		}
		t.row(append(row, unownedSummary(s))...)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if !x.opts.partitions {
		return nil
	}
	fmt.Fprintln(x.stdout)
	t = x.table("SUBSCRIPTION", "PARTITION", "STATE", "OWNER", "EPOCH", "ASSIGNED")
	for _, s := range c.Subscriptions {
		for _, p := range s.Partitions {
			t.row(s.Name, strconv.Itoa(p.Index), p.State, orDash(p.Owner), u(p.Epoch), orDash(p.Assigned))
		}
	}
	return t.flush()
}

// unownedSummary lists a subscription's unowned partitions by state,
// "released 0, 3; orphaned 7"; "-" for none.
func unownedSummary(s wire.ClusterSubscription) string {
	var parts []string
	for _, st := range wire.PartitionStates()[1:] { // all but owned
		var ps []string
		for _, p := range s.Partitions {
			if p.State == st {
				ps = append(ps, strconv.Itoa(p.Index))
			}
		}
		if len(ps) > 0 {
			parts = append(parts, st+" "+strings.Join(ps, ", "))
		}
	}
	return orDash(strings.Join(parts, "; "))
}
