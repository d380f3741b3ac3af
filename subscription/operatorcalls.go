package subscription

import (
	"context"
	"time"
)

// Operator is the operator's calls on subscriptions, as the REST API and
// bulk jobs make them. *Engine is one: a single host acts on its own. In a
// cluster the host's cluster.Forwarder is one: a resume or skip acts on the
// host that owns the aggregate's partition, a pause, unpause or reset on
// every host, and the caller sees the same result as on a single host.
type Operator interface {
	Resume(ctx context.Context, sub, aggregateType, aggregateID string, by Caller) error
	Skip(ctx context.Context, sub, aggregateType, aggregateID string, throughVersion uint64, by Caller) error
	Pause(ctx context.Context, sub string, by Caller) error
	PauseUntil(ctx context.Context, sub string, until time.Time, by Caller) error
	Unpause(ctx context.Context, sub string, by Caller) error
	Reset(ctx context.Context, sub string, position uint64, by Caller) error
	// Subscriptions names the subscriptions the calls apply to.
	Subscriptions() []string
}

var _ Operator = (*Engine)(nil)
