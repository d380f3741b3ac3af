package tests

// The network-fault harness's processes (netfault_test.go): nats-server
// nodes and built hosts, each in a network namespace of its own
// (internal/testing/netns), and the services the hosts call, on the
// namespaces' bridge, recording every call with its start and end.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/internal/testing/netns"
	"github.com/berthhq/berth/internal/testing/syncbuf"
	"github.com/berthhq/berth/internal/testing/testbuild"
	"github.com/nats-io/nats.go"
)

// natsServerBin builds nats-server (a module dependency) once, beside the
// host binary.
var natsServerBin = sync.OnceValues(func() (string, error) {
	root, err := testbuild.RepoRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(buildDir, "nats-server")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/nats-io/nats-server/v2")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build nats-server: %v\n%s", err, out)
	}
	return bin, nil
})

// natsProc is one nats-server process in a namespace.
type natsProc struct {
	name string
	ns   *netns.NS
	cmd  *exec.Cmd
	log  *syncbuf.Buffer
	done chan struct{}
}

func (n *natsProc) URL() string { return "nats://" + n.ns.IP + ":4222" }

// startNATSCluster starts a JetStream cluster of one node per namespace,
// and waits until each says it is healthy. Servers ping their clients and
// routes every second, as a deployment that wants a silent cut noticed in
// seconds would set.
func startNATSCluster(t testing.TB, spaces []*netns.NS) []*natsProc {
	t.Helper()
	bin, err := natsServerBin()
	if err != nil {
		t.Fatal(err)
	}
	var routes []string
	for _, s := range spaces {
		routes = append(routes, fmt.Sprintf("%q", "nats://"+s.IP+":6222"))
	}
	var nodes []*natsProc
	for i, s := range spaces {
		dir := t.TempDir()
		conf := filepath.Join(dir, "nats.conf")
		writeFile(t, conf, fmt.Sprintf(`server_name: n%[1]d
listen: "%[2]s:4222"
http: "%[2]s:8222"
ping_interval: "1s"
ping_max: 2
jetstream { store_dir: %[3]q }
cluster { name: "berth-netns", listen: "%[2]s:6222", routes: [%[4]s] }
`, i, s.IP, filepath.Join(dir, "js"), strings.Join(routes, ", ")))
		n := &natsProc{name: fmt.Sprint("n", i), ns: s, log: &syncbuf.Buffer{}, done: make(chan struct{})}
		n.cmd = s.Command(bin, "-c", conf)
		n.cmd.Stdout, n.cmd.Stderr = n.log, n.log
		if err := n.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { n.cmd.Wait(); close(n.done) }()
		t.Cleanup(func() {
			n.cmd.Process.Signal(syscall.SIGCONT)
			n.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-n.done:
			case <-time.After(10 * time.Second):
				n.cmd.Process.Kill()
				<-n.done
			}
			if t.Failed() {
				t.Logf("%s log:\n%s", n.name, n.log.String())
			}
		})
		nodes = append(nodes, n)
	}
	checkfor.Within(t, 60*time.Second, func() error {
		for _, n := range nodes {
			select {
			case <-n.done:
				t.Fatalf("%s exited: %s", n.name, n.log.String())
			default:
			}
			if got := n.health(); got != 200 {
				return fmt.Errorf("%s: /healthz %d", n.name, got)
			}
		}
		return nil
	})
	return nodes
}

var monitor = &http.Client{Timeout: 2 * time.Second}

func (n *natsProc) health() int {
	r, err := monitor.Get("http://" + n.ns.IP + ":8222/healthz")
	if err != nil {
		return 0
	}
	r.Body.Close()
	return r.StatusCode
}

// clientIPs are the addresses of the clients connected to n; nil when n
// does not answer.
func (n *natsProc) clientIPs() []string {
	r, err := monitor.Get("http://" + n.ns.IP + ":8222/connz?limit=1000")
	if err != nil {
		return nil
	}
	defer r.Body.Close()
	var v struct {
		Connections []struct {
			IP string `json:"ip"`
		} `json:"connections"`
	}
	if json.NewDecoder(r.Body).Decode(&v) != nil {
		return nil
	}
	var out []string
	for _, c := range v.Connections {
		out = append(out, c.IP)
	}
	return out
}

// leader returns the node leading stream, as n sees it ("" if unknown).
func (n *natsProc) leader(stream string) string {
	r, err := monitor.Get("http://" + n.ns.IP + ":8222/jsz?accounts=true&streams=true")
	if err != nil {
		return ""
	}
	defer r.Body.Close()
	var v struct {
		Accounts []struct {
			Streams []struct {
				Name    string `json:"name"`
				Cluster struct {
					Leader string `json:"leader"`
				} `json:"cluster"`
			} `json:"stream_detail"`
		} `json:"account_details"`
	}
	if json.NewDecoder(r.Body).Decode(&v) != nil {
		return ""
	}
	for _, a := range v.Accounts {
		for _, s := range a.Streams {
			if s.Name == stream {
				return s.Cluster.Leader
			}
		}
	}
	return ""
}

// leadOff has another node lead stream, if n does: the stream's leader
// steps down until the one elected is not n.
func (n *natsProc) leadOff(t testing.TB, stream string) {
	t.Helper()
	nc, err := nats.Connect(n.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	checkfor.Nil(t, 30*time.Second, 200*time.Millisecond, func() error {
		l := n.leader(stream)
		if l != "" && l != n.name {
			return nil
		}
		if l == n.name {
			nc.Request("$JS.API.STREAM.LEADER.STEPDOWN."+stream, nil, 2*time.Second)
		}
		return fmt.Errorf("%s leads %s (leader %q)", n.name, stream, l)
	})
}

// startHostIn starts a host with cfg in s, serving on s's address: off
// loopback, so with an admin token the test's requests carry.
func startHostIn(t testing.TB, s *netns.NS, cfg hostConfig) *hostProc {
	t.Helper()
	cfg.Extra += "\n[[auth.tokens]]\nname = \"root\"\nrole = \"admin\"\ntoken = \"" + adminToken + "\"\n"
	data := t.TempDir()
	path := filepath.Join(data, "berth.toml")
	writeFile(t, path, cfg.TOML())
	h := spawnCmd(t, data, path, s.Command(hostBin, "serve", "--config", path, "--data", data, "--listen", s.IP+":8080"))
	if err := h.awaitServing(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	h.token = adminToken
	return h
}

// span is one call a host's service served: which host made it, for
// which order, from its arrival to its answer.
type span struct {
	host       int
	order, key string
	start, end time.Time
}

// spans records the calls of every host's service.
type spans struct {
	mu  sync.Mutex
	all []span
}

// newNotifierAt starts a notifier listening on addr (the bridge, for the
// hosts in namespaces) that records each call's span as host's.
func newNotifierAt(t testing.TB, addr string, host int, rec *spans) *notifier {
	t.Helper()
	n := &notifier{script: map[string]*behaviour{}, arrivals: map[string]int{}}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	n.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var msg struct {
			Order string `json:"order"`
		}
		json.Unmarshal(body, &msg)
		start := time.Now()
		n.serve(w, r)
		rec.mu.Lock()
		rec.all = append(rec.all, span{host: host, order: msg.Order, key: r.Header.Get("Idempotency-Key"), start: start, end: time.Now()})
		rec.mu.Unlock()
	}))
	n.srv.Listener.Close()
	n.srv.Listener = l
	n.srv.Start()
	t.Cleanup(n.srv.Close)
	return n
}

// overlaps lists the pairs of calls for one order, from two hosts, whose
// spans overlap in time: the downstream saw one aggregate handled by two
// hosts at once.
func (s *spans) overlaps() []string {
	s.mu.Lock()
	byOrder := map[string][]span{}
	for _, c := range s.all {
		byOrder[c.order] = append(byOrder[c.order], c)
	}
	s.mu.Unlock()
	var out []string
	for order, cs := range byOrder {
		slices.SortFunc(cs, func(a, b span) int { return a.start.Compare(b.start) })
		for i, a := range cs {
			for _, b := range cs[i+1:] {
				if !b.start.Before(a.end) {
					break
				}
				if a.host != b.host {
					out = append(out, fmt.Sprintf("%s: host-%d %s–%s (%s) and host-%d %s–%s (%s)", order,
						a.host, a.start.Format("15:04:05.000"), a.end.Format("15:04:05.000"), a.key,
						b.host, b.start.Format("15:04:05.000"), b.end.Format("15:04:05.000"), b.key))
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// merged is a notifier holding every host's calls, by arrival: the one
// downstream the checks of order and completeness read.
func merged(svcs []*notifier) *notifier {
	var all []call
	for _, s := range svcs {
		all = append(all, s.callsOf("")...)
	}
	slices.SortStableFunc(all, func(a, b call) int { return a.At.Compare(b.At) })
	return &notifier{calls: all}
}
