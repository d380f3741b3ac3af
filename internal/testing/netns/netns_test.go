package netns

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// listenIn listens on addr inside s: the socket is made on a thread moved
// into s, and stays in s's network once the thread is back.
func listenIn(t *testing.T, s *NS, addr string) net.Listener {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	self, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	defer self.Close()
	target, err := os.Open("/run/netns/" + s.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		t.Fatal(err)
	}
	l, lerr := net.Listen("tcp", addr)
	if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
		t.Fatal(err) // the thread stays locked, and dies with the goroutine
	}
	if lerr != nil {
		t.Fatal(lerr)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("hello\n"))
			c.Close()
		}
	}()
	return l
}

// dial says whether a process inside s reads the greeting at addr within
// a second.
func dial(s *NS, addr string) error {
	host, port, _ := strings.Cut(addr, ":")
	out, err := s.Command("timeout", "1", "bash", "-c", fmt.Sprintf("exec 3<>/dev/tcp/%s/%s; head -1 <&3", host, port)).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "hello" {
		return fmt.Errorf("from %s to %s: %v %q", s.Name, addr, err, out)
	}
	return nil
}

// TestCutHealLossAndCleanup: two namespaces reach each other and the root
// namespace; a cut stops their packets and no one else's, a heal brings
// them back, a loss of 100 % is a cut, and once the test is over no
// namespace or link of it is left.
func TestCutHealLossAndCleanup(t *testing.T) {
	var names []string
	var bridge string
	t.Run("net", func(t *testing.T) {
		n := New(t)
		a, b, c := n.Add("a"), n.Add("b"), n.Add("c")
		names, bridge = []string{a.Name, b.Name, c.Name}, n.bridge
		addr := a.IP + ":7000"
		listenIn(t, a, addr)
		if err := dial(b, addr); err != nil {
			t.Fatalf("before any fault: %v", err)
		}
		n.Cut(a, b)
		if err := dial(b, addr); err == nil {
			t.Errorf("b reached a through a cut")
		}
		if err := dial(c, addr); err != nil {
			t.Errorf("the cut between a and b stopped c: %v", err)
		}
		// The root namespace reaches a: the test keeps talking to
		// processes cut off from each other.
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			t.Errorf("the root namespace does not reach a during a cut: %v", err)
		} else {
			conn.Close()
		}
		n.Heal(a, b)
		if err := dial(b, addr); err != nil {
			t.Errorf("after the heal: %v", err)
		}
		n.Loss(a, 100, c)
		if err := dial(c, addr); err == nil {
			t.Errorf("c reached a through a 100%% loss")
		}
		n.HealAll()
		if err := dial(c, addr); err != nil {
			t.Errorf("after HealAll: %v", err)
		}
	})
	for _, name := range names {
		if _, err := os.Stat("/run/netns/" + name); err == nil {
			t.Errorf("namespace %s left after the test", name)
		}
	}
	if out, err := run("ip", "-o", "link", "show"); err != nil || strings.Contains(out, bridge) {
		t.Errorf("links of %s left after the test: %v\n%s", bridge, err, out)
	}
}

// TestRules: the nft script for a namespace's faults.
func TestRules(t *testing.T) {
	got := rules(map[string]bool{"10.0.0.3": true, "10.0.0.2": true}, map[string]int{"10.0.0.4": 40})
	for _, want := range []string{
		"ip saddr { 10.0.0.2, 10.0.0.3 } drop",
		"ip daddr { 10.0.0.2, 10.0.0.3 } drop",
		"ip saddr 10.0.0.4 numgen random mod 100 < 40 drop",
		"ip daddr 10.0.0.4 numgen random mod 100 < 40 drop",
		"delete table ip berthfault",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("rules lack %q:\n%s", want, got)
		}
	}
	if clean := rules(nil, nil); strings.Contains(clean, "drop") {
		t.Errorf("rules without faults drop something:\n%s", clean)
	}
}
