package config

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/berthhq/berth/cluster"
	"github.com/berthhq/berth/retry"
)

// Defaults and bounds of [cluster].
const (
	// DefaultLeaseTTL is cluster.lease-ttl: how long a host's membership (and a duty it holds) lasts
	// without a renewal. A killed host's partitions are owned again within about twice it.
	DefaultLeaseTTL = retry.Duration(cluster.DefaultLeaseTTL)
	// MinLeaseTTL is the shortest cluster.lease-ttl: a host renews every third of it, and a shorter
	// lease would be lost to one slow round trip or garbage-collection pause.
	MinLeaseTTL = retry.Duration(3 * time.Second)
	// MaxHostIDLength bounds cluster.host-id (it is a KV key and a subject token).
	MaxHostIDLength = 64
)

// ClusterConfig is [cluster]: this host's place among the hosts that share one NATS JetStream
// deployment. Cluster mode is on exactly when store.backend is "jetstream"; the table is not used
// otherwise. Changing any of it needs a restart.
type ClusterConfig struct {
	// HostID names this host in the deployment: letters, digits, '-' and '_', unique among the hosts and
	// the same across its restarts (default "": the machine's hostname, every other character made '-').
	HostID string `toml:"host-id"`
	// LeaseTTL is how long a host's membership lasts without a renewal (default 15s, at least 3s); every
	// host of a deployment must use the same. A killed host's partitions move within about twice it.
	LeaseTTL retry.Duration `toml:"lease-ttl"`
	// Address is the URL other hosts and operators reach this host's REST API at, shown in /v1/cluster
	// (default "": http:// and server.listen, with the machine's hostname for an unspecified address).
	Address string `toml:"address"`
}

func (c ClusterConfig) validate(p *problems, at keyPath) {
	if c.HostID != "" {
		switch {
		case len(c.HostID) > MaxHostIDLength:
			p.add(at.key("host-id"), strconv.Quote(c.HostID), "must be at most %d characters", MaxHostIDLength)
		case !cluster.ValidHostID(c.HostID):
			p.add(at.key("host-id"), strconv.Quote(c.HostID), "must be letters, digits, '-' and '_' only")
		}
	}
	if c.LeaseTTL < MinLeaseTTL {
		p.add(at.key("lease-ttl"), strconv.Quote(c.LeaseTTL.String()), "must be at least %s", MinLeaseTTL)
	}
	if c.Address != "" {
		if err := checkHTTPURL(c.Address, ""); err != nil {
			p.add(at.key("address"), strconv.Quote(c.Address), "%v", err)
		}
	}
}

// ClusterHostID returns this host's id: cluster.host-id, or the machine's hostname made a valid id.
func (c *Config) ClusterHostID() (string, error) {
	if c.Cluster.HostID != "" {
		return c.Cluster.HostID, nil
	}
	name, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("cluster.host-id is not set and the hostname is unknown (%w): set cluster.host-id", err)
	}
	id := hostIDOf(name)
	if id == "" {
		return "", fmt.Errorf("cluster.host-id is not set and the hostname %q makes no id: set cluster.host-id", name)
	}
	return id, nil
}

// hostIDOf makes a hostname a host id: every character but letters, digits, '-' and '_' becomes '-'
// ("web-1.example.com" is "web-1-example-com"), cut to MaxHostIDLength; "" for an empty name.
func hostIDOf(name string) string {
	id := []byte(strings.TrimSpace(name))
	for i, b := range id {
		if !(b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '-' || b == '_') {
			id[i] = '-'
		}
	}
	return string(id[:min(len(id), MaxHostIDLength)])
}

// ClusterAddress returns the URL of this host's REST API for the others: cluster.address, or
// "http://" and server.listen, whose host is replaced by the machine's hostname when it listens on
// every interface (":8080", "0.0.0.0:8080", "[::]:8080"). With port 0 the derived address says port
// 0: set cluster.address.
func (c *Config) ClusterAddress() string {
	if c.Cluster.Address != "" {
		return c.Cluster.Address
	}
	return addressOf(c.Server.Listen, os.Hostname)
}

func addressOf(listen string, hostname func() (string, error)) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "http://" + listen
	}
	if a, perr := netip.ParseAddr(host); host == "" || (perr == nil && a.IsUnspecified()) {
		if name, err := hostname(); err == nil && name != "" {
			host = name
		}
	}
	return "http://" + net.JoinHostPort(host, port)
}
