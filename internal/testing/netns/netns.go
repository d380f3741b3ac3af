// Package netns makes a small network of Linux network namespaces for fault
// tests: one namespace per process (a NATS node, a host), each with one veth
// onto a bridge of its own in the root namespace, addresses in a private
// /24, and faults between namespaces made with nftables rules inside them
// (a cut: every packet dropped, silently; a lossy link: a share of them).
// Processes run inside with `ip netns exec`.
//
// It owns the namespaces, links and rules it makes, and deletes every one
// of them when the test ends, failed or not. No rule ever goes on the root
// namespace's own interfaces: a fault lives inside the namespaces of its two
// ends. Names carry the test process's id, so packages testing in parallel
// do not collide, and what a killed test process left behind is swept by
// the next one.
//
// Faults are nftables rules rather than tc netem because netem (and tc's
// drop action) may be missing from a kernel built without them, as on the
// machines this project runs on, while nftables' numgen gives random loss.
// A test where namespaces cannot be made (not root, no `ip` or `nft`) is
// skipped with a message saying what is missing.
package netns

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
)

// prefix starts every name this package gives a namespace or a link.
const prefix = "bn"

// nets numbers the networks of this process.
var nets atomic.Int32

// Net is one bridge and the namespaces on it.
type Net struct {
	t      testing.TB
	id     string // prefix, pid and number: unique among live processes
	bridge string
	subnet string // "10.a.b": the /24 without its last byte
	gw     string // the bridge's address in the root namespace

	mu     sync.Mutex
	spaces []*NS
}

// NS is one namespace on a Net.
type NS struct {
	net  *Net
	Name string // as `ip netns` knows it
	IP   string // its address on the bridge
	veth string // its link's end on the bridge

	drop map[string]bool // peer addresses cut off
	loss map[string]int  // peer address → share of packets dropped, in percent
}

// Available says why namespaces cannot be made here, or nil.
func Available() error {
	if os.Geteuid() != 0 {
		return errors.New("netns: not root: network namespaces need CAP_NET_ADMIN")
	}
	for _, tool := range []string{"ip", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("netns: %s is not installed (Debian: iproute2, nftables)", tool)
		}
	}
	return nil
}

// New makes a bridge in a free private /24 for t, and skips t with the
// reason when namespaces cannot be made here. Everything made through it is
// deleted when t ends.
func New(t testing.TB) *Net {
	t.Helper()
	if err := Available(); err != nil {
		t.Skip(err)
	}
	sweep()
	n := &Net{t: t, id: fmt.Sprintf("%s%x_%x", prefix, os.Getpid(), nets.Add(1))}
	n.bridge = n.id
	if _, err := run("ip", "link", "add", n.bridge, "type", "bridge"); err != nil {
		t.Skipf("netns: cannot make a bridge here: %v", err)
	}
	t.Cleanup(n.cleanup)
	subnet, err := freeSubnet(os.Getpid() + int(nets.Load()))
	if err != nil {
		t.Fatal(err)
	}
	n.subnet, n.gw = subnet, subnet+".1"
	n.must("ip", "addr", "add", n.gw+"/24", "dev", n.bridge)
	n.must("ip", "link", "set", n.bridge, "up")
	return n
}

// Gateway is the bridge's address in the root namespace: where the test's
// own servers listen to be reached from the namespaces.
func (n *Net) Gateway() string { return n.gw }

// Add makes a namespace with a link onto the bridge, its loopback up and
// the next address of the subnet; label (short, e.g. "n1", "h0") names it.
func (n *Net) Add(label string) *NS {
	n.t.Helper()
	n.mu.Lock()
	i := len(n.spaces)
	s := &NS{net: n, Name: n.id + "-" + label, IP: fmt.Sprintf("%s.%d", n.subnet, 10+i),
		drop: map[string]bool{}, loss: map[string]int{}}
	n.spaces = append(n.spaces, s)
	n.mu.Unlock()
	veth := fmt.Sprintf("%sv%d", n.id, i)
	s.veth = veth
	n.must("ip", "netns", "add", s.Name)
	n.must("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", s.Name)
	n.must("ip", "link", "set", veth, "master", n.bridge, "up")
	n.must("ip", "-n", s.Name, "addr", "add", s.IP+"/24", "dev", "eth0")
	n.must("ip", "-n", s.Name, "link", "set", "eth0", "up")
	n.must("ip", "-n", s.Name, "link", "set", "lo", "up")
	return s
}

// Command returns a command that runs name inside s. `ip netns exec` execs
// it, so the process's id is the command's: signals reach it.
func (s *NS) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", s.Name, name}, args...)...)
}

// Cut drops every packet between a and each of peers, both ways, until
// Heal: a silent loss, as a pulled cable or a firewall's DROP.
func (n *Net) Cut(a *NS, peers ...*NS) { n.set(a, peers, func(ip string) { a.drop[ip] = true }) }

// Heal ends the cuts and losses between a and each of peers.
func (n *Net) Heal(a *NS, peers ...*NS) {
	n.set(a, peers, func(ip string) { delete(a.drop, ip); delete(a.loss, ip) })
}

// Loss drops pct percent of the packets between a and each of peers, each
// way, picked at random; 0 ends it.
func (n *Net) Loss(a *NS, pct int, peers ...*NS) {
	n.set(a, peers, func(ip string) {
		if pct <= 0 {
			delete(a.loss, ip)
		} else {
			a.loss[ip] = pct
		}
	})
}

// HealAll ends every cut and loss on the net.
func (n *Net) HealAll() {
	n.mu.Lock()
	spaces := slices.Clone(n.spaces)
	n.mu.Unlock()
	for _, s := range spaces {
		n.mu.Lock()
		clear(s.drop)
		clear(s.loss)
		n.mu.Unlock()
		n.apply(s)
	}
}

// set changes a's faults towards peers with change, and applies them. The
// rules live in a alone: every packet between a and a peer passes a's
// input or output hook.
func (n *Net) set(a *NS, peers []*NS, change func(ip string)) {
	n.t.Helper()
	n.mu.Lock()
	for _, p := range peers {
		change(p.IP)
	}
	n.mu.Unlock()
	n.apply(a)
}

// apply replaces s's rules with its fault state, in one nft transaction.
func (n *Net) apply(s *NS) {
	n.t.Helper()
	n.mu.Lock()
	script := rules(s.drop, s.loss)
	n.mu.Unlock()
	cmd := exec.Command("ip", "netns", "exec", s.Name, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		n.t.Fatalf("netns: nft in %s: %v\n%s\n%s", s.Name, err, out, script)
	}
}

// rules is the nft script that puts drop and loss in place of whatever
// rules the namespace had.
func rules(drop map[string]bool, loss map[string]int) string {
	var in, out bytes.Buffer
	if len(drop) > 0 {
		set := strings.Join(slices.Sorted(maps.Keys(drop)), ", ")
		fmt.Fprintf(&in, "  ip saddr { %s } drop\n", set)
		fmt.Fprintf(&out, "  ip daddr { %s } drop\n", set)
	}
	for _, ip := range slices.Sorted(maps.Keys(loss)) {
		if loss[ip] >= 100 {
			fmt.Fprintf(&in, "  ip saddr %s drop\n", ip)
			fmt.Fprintf(&out, "  ip daddr %s drop\n", ip)
			continue
		}
		fmt.Fprintf(&in, "  ip saddr %s numgen random mod 100 < %d drop\n", ip, loss[ip])
		fmt.Fprintf(&out, "  ip daddr %s numgen random mod 100 < %d drop\n", ip, loss[ip])
	}
	return "table ip berthfault\ndelete table ip berthfault\ntable ip berthfault {\n" +
		" chain in {\n  type filter hook input priority 0; policy accept;\n" + in.String() + " }\n" +
		" chain out {\n  type filter hook output priority 0; policy accept;\n" + out.String() + " }\n}\n"
}

// cleanup ends the processes left in the namespaces (only ever the test's
// own: the names are this process's), then deletes their links (a veth's
// two ends go together; a namespace's deletion would take them only later,
// on the kernel's own time), the namespaces and the bridge.
func (n *Net) cleanup() {
	n.mu.Lock()
	spaces := slices.Clone(n.spaces)
	n.mu.Unlock()
	for _, s := range spaces {
		run("ip", "link", "del", s.veth)
		remove(s.Name)
	}
	if _, err := run("ip", "link", "del", n.bridge); err != nil {
		n.t.Errorf("netns: delete bridge %s: %v", n.bridge, err)
	}
	for _, s := range spaces {
		if _, err := os.Stat("/run/netns/" + s.Name); err == nil {
			n.t.Errorf("netns: namespace %s is still there after the cleanup", s.Name)
		}
	}
}

// remove kills the processes in namespace name and deletes it.
func remove(name string) {
	if out, err := run("ip", "netns", "pids", name); err == nil {
		for _, f := range strings.Fields(out) {
			if pid, err := strconv.Atoi(f); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	run("ip", "netns", "del", name)
}

// sweep deletes the namespaces and links of test processes that no longer
// run (killed before their cleanup).
func sweep() {
	dead := func(name string) bool {
		rest, ok := strings.CutPrefix(name, prefix)
		hex, _, ok2 := strings.Cut(rest, "_")
		pid, err := strconv.ParseInt(hex, 16, 32)
		if !ok || !ok2 || err != nil {
			return false
		}
		return syscall.Kill(int(pid), 0) == syscall.ESRCH
	}
	if out, err := run("ip", "netns", "list"); err == nil {
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) > 0 && dead(f[0]) {
				remove(f[0])
			}
		}
	}
	// Bridges and the veth ends on them: "12: bn4c8d_1v1@if2: <...".
	if out, err := run("ip", "-o", "link", "show"); err == nil {
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) > 1 {
				name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
				if dead(name) {
					run("ip", "link", "del", name)
				}
			}
		}
	}
}

// freeSubnet picks a /24 of 10.231.0.0/16 that no address of the root
// namespace is in, starting at one derived from seed.
func freeSubnet(seed int) (string, error) {
	out, err := run("ip", "-o", "-4", "addr", "show")
	if err != nil {
		return "", err
	}
	for k := range 250 {
		s := fmt.Sprintf("10.231.%d", (seed+k)%250+1)
		if !strings.Contains(out, " "+s+".") {
			return s, nil
		}
	}
	return "", errors.New("netns: no free /24 in 10.231.0.0/16")
}

func (n *Net) must(args ...string) {
	n.t.Helper()
	if _, err := run(args...); err != nil {
		n.t.Fatal(err)
	}
}

func run(args ...string) (string, error) {
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("netns: %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return string(out), nil
}
