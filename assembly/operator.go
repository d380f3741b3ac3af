package assembly

import (
	"log/slog"
	"time"

	"github.com/berthhq/berth/cluster"
	"github.com/berthhq/berth/config"
	"github.com/berthhq/berth/subscription"
	"github.com/nats-io/nats.go"
)

// openOperator returns what makes the host's operator calls (the REST API's
// and the bulk jobs'; api.Deps.Operator, jobs.Options.Engine) and what stops
// it. On a single host (c nil) that is the engine itself, with nothing to
// stop. In a cluster it is a cluster.Forwarder over the engine, the host's
// Cluster and its NATS connection, on the deployment's S_OPS subjects (S =
// store.jetstream.stream), waiting server.operator-wait (read at each call,
// so a reload applies) for a call without a deadline; it answers the other
// hosts' calls until stopped, which must come before the engine closes.
func openOperator(eng *subscription.Engine, c *cluster.Cluster, nc *nats.Conn, cfg func() *config.Config, log *slog.Logger) (subscription.Operator, func() error, error) {
	if c == nil {
		return eng, func() error { return nil }, nil
	}
	f, err := cluster.NewForwarder(eng, c, nc, cluster.ForwarderOptions{
		Deployment: cfg().Store.JetStream.Stream,
		Wait:       func() time.Duration { return cfg().Server.OperatorWait.Std() },
		Logger:     log,
	})
	if err != nil {
		return nil, nil, &OpenError{Part: "operator calls", Err: err}
	}
	return f, f.Close, nil
}
