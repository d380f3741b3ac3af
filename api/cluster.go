package api

import (
	"context"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/berthhq/berth/api/wire"
	"github.com/berthhq/berth/cluster"
	"github.com/berthhq/berth/internal/buildinfo"
	"github.com/labstack/echo/v4"
)

// ClusterView is what GET /v1/cluster reads of this host's place in a
// deployment of several hosts: a *cluster.Cluster. Deps.Cluster nil (or a
// nil *cluster.Cluster) is a single host.
type ClusterView interface {
	// Host is this host's id.
	Host() string
	// LeaseTTL and Partitions are the deployment's shared settings.
	LeaseTTL() time.Duration
	Partitions() int
	// Members are the live hosts as this host's watcher sees them.
	Members() []cluster.Member
	// Assignments reads every partition's owner from the ledger.
	Assignments(ctx context.Context) ([]cluster.Assignment, error)
	// Stats are this host's counters since it joined.
	Stats() cluster.Stats
	// Reachable asks NATS JetStream for the membership, so that an answer
	// never passes a stale view off as the current one.
	Reachable(ctx context.Context) error
}

// clusterReadTimeout bounds the reads of GET /v1/cluster on NATS: the
// console polls it, and a NATS cluster that does not answer is better said
// (503) than waited on.
const clusterReadTimeout = 5 * time.Second

// getCluster answers GET /v1/cluster. A single host answers too (mode
// "single", every partition its own) rather than 404, so that a client needs
// no second path to tell the modes apart.
func (s *Server) getCluster(c echo.Context) error {
	if s.deps.Cluster == nil {
		return c.JSON(http.StatusOK, s.singleHost())
	}
	cv := s.deps.Cluster
	ctx, cancel := context.WithTimeout(c.Request().Context(), clusterReadTimeout)
	defer cancel()
	if err := cv.Reachable(ctx); err != nil {
		return clusterUnavailable(err)
	}
	as, err := cv.Assignments(ctx)
	if err != nil {
		return clusterUnavailable(err)
	}
	return c.JSON(http.StatusOK, toWireCluster(clusterSettings{cv.Host(), cv.LeaseTTL(), cv.Partitions()}, cv.Members(), as, cv.Stats()))
}

// clusterUnavailable is the 503 of a deployment whose state NATS JetStream
// did not give.
func clusterUnavailable(err error) *Problem {
	return problem(http.StatusServiceUnavailable, "cluster-unavailable",
		"the deployment's membership and partition owners are kept on NATS JetStream, which did not answer (store.jetstream.urls): "+err.Error())
}

// clusterSettings are what toWireCluster shows of the answering host.
type clusterSettings struct {
	host       string
	leaseTTL   time.Duration
	partitions int
}

// toWireCluster is the deployment as GET /v1/cluster shows it: members and
// the ledger's owners (as sorted by cluster.Assignments), each partition's
// state told from whether its owner is among the live hosts.
func toWireCluster(at clusterSettings, members []cluster.Member, as []cluster.Assignment, st cluster.Stats) wire.Cluster {
	out := wire.Cluster{Mode: wire.ClusterModeCluster, Host: at.host, LeaseTTL: at.leaseTTL.String(),
		Partitions: at.partitions, Hosts: []wire.ClusterHost{}, Subscriptions: []wire.ClusterSubscription{}}
	live := map[string]int{} // host → index in out.Hosts
	for _, m := range members {
		live[m.Host] = len(out.Hosts)
		out.Hosts = append(out.Hosts, wire.ClusterHost{ID: m.Host, Address: m.Address, Version: m.Version, Joined: m.Started,
			LastRenewal: m.Renewed, LeaseAge: m.LeaseAge.Round(time.Millisecond).String(), Self: m.Self})
	}
	for _, a := range as {
		if n := len(out.Subscriptions); n == 0 || out.Subscriptions[n-1].Name != a.Subscription {
			out.Subscriptions = append(out.Subscriptions, wire.ClusterSubscription{Name: a.Subscription,
				Partitions: []wire.PartitionOwner{}, Unowned: []int{}})
		}
		sub := &out.Subscriptions[len(out.Subscriptions)-1]
		p := wire.PartitionOwner{Index: a.Partition, Owner: a.Owner, Epoch: a.Epoch, Assigned: a.Host}
		i, isLive := live[a.Owner]
		switch {
		case a.Owner == "":
			p.State = wire.PartitionUnclaimed
		case a.Released:
			p.State = wire.PartitionReleased
		case !isLive:
			p.State = wire.PartitionOrphaned
		default:
			p.State = wire.PartitionOwned
			out.Hosts[i].Owned++
		}
		if p.State != wire.PartitionOwned {
			sub.Unowned = append(sub.Unowned, a.Partition)
			out.Unowned++
		}
		sub.Partitions = append(sub.Partitions, p)
	}
	out.Stats = &wire.ClusterStats{Renewals: st.Renewals, RenewalFailures: st.RenewalFailures, LeasesLost: st.LeasesLost,
		GiveUps: st.GiveUps, Claims: st.Claims, ClaimConflicts: st.ClaimConflicts, Releases: st.Releases, Lost: st.Lost,
		EngineErrors: st.EngineErrors}
	return out
}

// singleHost is GET /v1/cluster on a single host: it alone, owning every
// partition of every subscription, none ever claimed (epoch 0).
func (s *Server) singleHost() wire.Cluster {
	host, err := os.Hostname()
	if err != nil {
		host = "localhost"
	}
	n := s.deps.Config().Subscription.Partitions
	names := slices.Sorted(slices.Values(s.deps.Engine.Subscriptions()))
	out := wire.Cluster{Mode: wire.ClusterModeSingle, Host: host, Partitions: n,
		Hosts:         []wire.ClusterHost{{ID: host, Version: buildinfo.Read().Version, Self: true, Owned: n * len(names)}},
		Subscriptions: make([]wire.ClusterSubscription, 0, len(names))}
	for _, name := range names {
		sub := wire.ClusterSubscription{Name: name, Partitions: make([]wire.PartitionOwner, n), Unowned: []int{}}
		for p := range n {
			sub.Partitions[p] = wire.PartitionOwner{Index: p, State: wire.PartitionOwned, Owner: host, Assigned: host}
		}
		out.Subscriptions = append(out.Subscriptions, sub)
	}
	return out
}
