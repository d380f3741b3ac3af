package cluster

import (
	"context"
	"fmt"
	"time"
)

// What an operator's view of the deployment (GET /v1/cluster) reads beside
// Members, Assignments and Stats: the settings every host must share, and
// whether the membership can be read from the server right now.

// LeaseTTL returns the lease TTL this host uses (Options.LeaseTTL), the
// membership bucket's TTL: a host whose lease age passes it is gone.
func (c *Cluster) LeaseTTL() time.Duration { return c.opts.LeaseTTL }

// Partitions returns the number of partitions of every subscription
// (Options.Partitions).
func (c *Cluster) Partitions() int { return c.opts.Partitions }

// Reachable asks the server for the membership bucket's state: an error
// means NATS JetStream cannot be reached (or answered no bucket) within
// ctx, so Members is this host's last view, which may be stale.
func (c *Cluster) Reachable(ctx context.Context) error {
	if _, err := c.kv.Status(ctx); err != nil {
		return fmt.Errorf("cluster: membership bucket on NATS JetStream: %w", err)
	}
	return nil
}
