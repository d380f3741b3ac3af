// Package natstest runs real NATS servers with JetStream inside a test
// process: a single node, or a cluster of several, each on its own free
// ports and its own store under t.TempDir(), shut down by t.Cleanup. Tests of
// the JetStream backends and of a Berth deployment across hosts use it;
// nothing else imports it, so the host binary does not link nats-server.
package natstest

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/nats-io/nats-server/v2/server"
)

// readyTimeout bounds how long a server may take to accept connections (and,
// in a cluster, to elect its JetStream meta leader).
const readyTimeout = 30 * time.Second

// Node is one NATS server of a test.
type Node struct {
	t     testing.TB
	opts  server.Options
	srv   *server.Server
	index int
}

// URL returns the client URL of the node, e.g. nats://127.0.0.1:40001.
func (n *Node) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", n.opts.Port) }

// Server returns the running server (nil after Shutdown).
func (n *Node) Server() *server.Server { return n.srv }

// Name returns the node's server name (n1, n2, … in a cluster; n1 alone).
func (n *Node) Name() string { return n.opts.ServerName }

// Shutdown stops the node as a crash would leave it: its store stays on
// disk, and Restart starts it again on the same ports and store.
func (n *Node) Shutdown() {
	if n.srv != nil {
		n.srv.Shutdown()
		n.srv.WaitForShutdown()
		n.srv = nil
	}
}

// Restart starts a node that Shutdown stopped, on the same ports and store.
func (n *Node) Restart() {
	n.t.Helper()
	if n.srv != nil {
		n.t.Fatalf("natstest: restart of %s, which is running", n.Name())
	}
	n.start()
}

func (n *Node) start() {
	n.t.Helper()
	if err := n.launch(); err != nil {
		n.t.Fatalf("natstest: %v", err)
	}
}

// errPortTaken is launch's when a port the node was to listen on was taken
// by another process after freePorts chose it.
var errPortTaken = errors.New("a port chosen was taken meanwhile")

// launch starts the node's server and waits until it listens. A listen
// that fails (a port taken since it was chosen) is told only to the
// server's logger, and the server then waits for ever: the fatalLog it is
// given fails launch at once instead, with errPortTaken.
func (n *Node) launch() error {
	opts := n.opts // NewServer keeps and changes what it is given
	srv, err := server.NewServer(&opts)
	if err != nil {
		return fmt.Errorf("server %s: %w", n.Name(), err)
	}
	fatal := fatalLog(make(chan string, 1))
	srv.SetLoggerV2(fatal, false, false, false)
	srv.Start()
	for end := time.Now().Add(readyTimeout); !srv.ReadyForConnections(readyPoll); {
		select {
		case msg := <-fatal:
			srv.Shutdown()
			if strings.HasPrefix(msg, "Error listening") {
				return fmt.Errorf("server %s: %w: %s", n.Name(), errPortTaken, msg)
			}
			return fmt.Errorf("server %s: %s", n.Name(), msg)
		default:
		}
		if time.Now().After(end) {
			srv.Shutdown()
			return fmt.Errorf("server %s not ready within %v", n.Name(), readyTimeout)
		}
	}
	n.srv = srv
	// The client port, the server's choice at the first start, is the one
	// a Restart takes again.
	n.opts.Port = srv.Addr().(*net.TCPAddr).Port
	return nil
}

// readyPoll is how long launch waits for a server to listen before it
// looks for a fatal error again.
const readyPoll = 100 * time.Millisecond

// fatalLog is a server's logger that keeps the first fatal error (a listen
// that failed) and drops everything else, as Options.NoLog does.
type fatalLog chan string

func (l fatalLog) Fatalf(format string, v ...any) {
	select {
	case l <- fmt.Sprintf(format, v...):
	default:
	}
}
func (fatalLog) Noticef(string, ...any) {}
func (fatalLog) Warnf(string, ...any)   {}
func (fatalLog) Errorf(string, ...any)  {}
func (fatalLog) Debugf(string, ...any)  {}
func (fatalLog) Tracef(string, ...any)  {}

// Cluster is a set of nodes: one alone (RunServer) or a JetStream cluster
// (RunCluster).
type Cluster struct {
	Nodes []*Node
}

// URLs returns every node's client URL, comma separated, as nats.Connect
// takes them.
func (c *Cluster) URLs() string {
	us := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		us[i] = n.URL()
	}
	return strings.Join(us, ",")
}

// RunServer starts one NATS server with JetStream on a free port and a store
// in a temporary directory; it is shut down when the test ends.
func RunServer(t testing.TB) *Node {
	t.Helper()
	return RunServerWith(t, nil)
}

// RunServerWith is RunServer with the server's options changed by mutate
// first (authentication, TLS) when it is not nil.
func RunServerWith(t testing.TB, mutate func(*server.Options)) *Node {
	t.Helper()
	n := &Node{t: t, opts: baseOptions(t, "n1")}
	if mutate != nil {
		mutate(&n.opts)
	}
	n.start()
	t.Cleanup(n.Shutdown)
	return n
}

// SyncAlways makes a server fsync every JetStream write before it
// acknowledges it, as `jetstream { sync_interval: always }` in a NATS config
// file does; without it a server syncs every two minutes. Pass it to
// RunServerWith or RunClusterWith.
func SyncAlways(o *server.Options) { o.SyncAlways = true }

// RunCluster starts a JetStream cluster of size nodes (3 for replicas of 3),
// each with its own client and route ports and store, routed to one another,
// and waits until it has elected a meta leader. Every node is shut down when
// the test ends.
func RunCluster(t testing.TB, size int) *Cluster {
	t.Helper()
	return RunClusterWith(t, size, nil)
}

// RunClusterWith is RunCluster with every node's options changed by mutate
// first (e.g. SyncAlways) when it is not nil.
func RunClusterWith(t testing.TB, size int, mutate func(*server.Options)) *Cluster {
	t.Helper()
	if size < 2 {
		t.Fatalf("natstest: a cluster of %d nodes; use RunServer for one", size)
	}
	// Each node's ports are chosen before any starts (every node routes to
	// all); one taken by another process meanwhile fails a listen, and the
	// cluster is started again on new ones (under load, "server n2 not
	// ready within 30s" was such a node).
	c := &Cluster{}
	for attempt := 1; ; attempt++ {
		err := c.start(t, size, mutate)
		if err == nil {
			break
		}
		c.shutdown()
		if !errors.Is(err, errPortTaken) || attempt == portAttempts {
			t.Fatalf("natstest: %v", err)
		}
	}
	// After the stores' t.TempDir, so that it runs before their removal.
	t.Cleanup(c.shutdown)
	c.WaitForMetaLeader(t)
	return c
}

// portAttempts bounds how many times RunClusterWith chooses ports again.
const portAttempts = 5

// start starts size nodes on ports free a moment ago, each with a store of
// its own; an error is any node's, the cluster then partly started.
func (c *Cluster) start(t testing.TB, size int, mutate func(*server.Options)) error {
	t.Helper()
	routePorts := freePorts(t, size)
	routes := make([]*url.URL, size)
	for i, p := range routePorts {
		routes[i] = &url.URL{Scheme: "nats", Host: fmt.Sprintf("127.0.0.1:%d", p)}
	}
	c.Nodes = nil
	for i := range size {
		opts := baseOptions(t, fmt.Sprintf("n%d", i+1))
		opts.Cluster = server.ClusterOpts{Name: "berth-test", Host: "127.0.0.1", Port: routePorts[i]}
		opts.Routes = routes
		if mutate != nil {
			mutate(&opts)
		}
		c.Nodes = append(c.Nodes, &Node{t: t, opts: opts, index: i})
	}
	// Start them all before waiting on any: a node of a JetStream cluster
	// elects a meta leader only once it sees the others.
	errs := make(chan error, size)
	for _, n := range c.Nodes {
		go func() { errs <- n.launch() }()
	}
	var err error
	for range size {
		err = errors.Join(err, <-errs)
	}
	return err
}

// shutdown stops every node of c.
func (c *Cluster) shutdown() {
	for _, n := range c.Nodes {
		n.Shutdown()
	}
}

// WaitForMetaLeader waits until the running nodes agree on a JetStream meta
// leader (after a start, or after a node was shut down or restarted) and the
// leader counts every running node as a JetStream peer with current stats,
// and every running node's view of the meta group is current (as
// nats-server's own tests wait): until then, a stream with as many replicas
// as nodes fails to be placed ("no suitable peers for placement") or waits
// long for its first leader.
func (c *Cluster) WaitForMetaLeader(t testing.TB) {
	t.Helper()
	checkfor.Nil(t, readyTimeout, 20*time.Millisecond, func() error {
		running := 0
		for _, n := range c.Nodes {
			if n.srv != nil {
				running++
			}
		}
		for _, n := range c.Nodes {
			if n.srv != nil && !n.srv.JetStreamIsCurrent() {
				return fmt.Errorf("natstest: %s's view of the JetStream meta group is not current", n.Name())
			}
		}
		for _, n := range c.Nodes {
			if n.srv != nil && n.srv.JetStreamIsLeader() {
				if peers := n.srv.JetStreamClusterPeers(); len(peers) != running {
					return fmt.Errorf("natstest: meta leader %s sees peers %v of %d running nodes", n.Name(), peers, running)
				}
				return nil
			}
		}
		return fmt.Errorf("natstest: no JetStream meta leader among %d running nodes", running)
	})
}

func baseOptions(t testing.TB, name string) server.Options {
	return server.Options{
		ServerName: name,
		Host:       "127.0.0.1",
		Port:       server.RANDOM_PORT, // launch keeps the one picked

		JetStream: true,
		StoreDir:  t.TempDir(),
		NoLog:     true,
		NoSigs:    true,
		// Large enough for a commit or a ledger transaction of the tests.
		MaxPayload: 8 << 20,
	}
}

// freePorts returns n ports that were free a moment ago: the route ports of
// a cluster, which each node must know of the others before they start
// (a client port is the server's choice, RANDOM_PORT).
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, n)
	ls := make([]net.Listener, n)
	for i := range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("natstest: free port: %v", err)
		}
		ls[i] = l
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}
