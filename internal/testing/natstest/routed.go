package natstest

import (
	"net/url"
	"strconv"
	"sync"
	"testing"

	"github.com/berthhq/berth/internal/faultnet"
	"github.com/nats-io/nats-server/v2/server"
)

// Routes are the routes of a cluster started by RunClusterRouted: each
// node's route to each other node goes through a proxy of its own
// (internal/faultnet), which Isolate cuts.
type Routes struct {
	mu      sync.Mutex
	proxies []routeProxy
	ports   map[string]string // node name → its cluster port
}

type routeProxy struct {
	from, toPort string
	p            *faultnet.Proxy
}

// RunClusterRouted is RunClusterWith (mutate may be nil) whose routes go
// through proxies the test can cut, to cut a node off from the others
// while it still answers its clients.
//
// Each node advertises an address nobody listens on as its cluster
// address: a node that hears of a peer it has no route to yet (from a
// third, while the cluster forms) dials the address that peer advertises,
// by default its real cluster port — a route past the proxies, which a
// cut would not cut. Dialled at a dead address, that route fails, and
// every route is one of the proxies.
func RunClusterRouted(t testing.TB, size int, mutate func(*server.Options)) (*Cluster, *Routes) {
	t.Helper()
	r := &Routes{ports: map[string]string{}}
	c := RunClusterWith(t, size, func(o *server.Options) {
		o.Cluster.Advertise = deadAddr
		if mutate != nil {
			mutate(o)
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		own := strconv.Itoa(o.Cluster.Port)
		r.ports[o.ServerName] = own
		var routes []*url.URL
		for _, u := range o.Routes {
			if u.Port() == own {
				continue
			}
			p, err := faultnet.Listen(u.Host)
			if err != nil {
				t.Fatalf("natstest: route proxy: %v", err)
			}
			t.Cleanup(p.Close) // after the nodes stopped
			r.proxies = append(r.proxies, routeProxy{from: o.ServerName, toPort: u.Port(), p: p})
			routes = append(routes, &url.URL{Scheme: "nats", Host: p.Addr()})
		}
		o.Routes = routes
	})
	return c, r
}

// deadAddr is an address nothing listens on: the discard port, which a
// test machine does not serve.
const deadAddr = "127.0.0.1:9"

// Isolate cuts every route from and to the node named name: it still
// answers its clients, but hears nothing of the others, nor they of it.
func (r *Routes) Isolate(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rp := range r.proxies {
		if rp.from == name || rp.toPort == r.ports[name] {
			rp.p.Cut()
		}
	}
}

// Heal lets every route pass again.
func (r *Routes) Heal() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rp := range r.proxies {
		rp.p.Heal()
	}
}
