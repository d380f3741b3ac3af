package main

import (
	"fmt"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/api"
	"github.com/berthhq/berth/api/wire"
	"github.com/berthhq/berth/cluster/clustertest"
	"github.com/berthhq/berth/config"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/internal/testing/natstest"
)

// TestClusterSingle: `berth cluster` on the test's host, which is a single
// host, says so in one line; --json is the server's answer.
func TestClusterSingle(t *testing.T) {
	code, out, errOut := runCLI("", "cluster")
	if code != exitOK || !strings.HasPrefix(out, "single host ") || !strings.Contains(out, "owns all 16 partitions of every subscription") ||
		strings.Count(out, "\n") != 1 {
		t.Errorf("berth cluster: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, _ = runCLI("", "cluster", "--json")
	if c := decodeJSON[wire.Cluster](t, out); code != exitOK || c.Mode != wire.ClusterModeSingle || len(c.Hosts) != 1 || !c.Hosts[0].Self {
		t.Errorf("berth cluster --json: exit %d, %+v", code, c)
	}
}

// TestClusterHosts: `berth cluster` against the API over real clusters on
// in-process NATS (cluster/clustertest): h1 shares out mailer and orders,
// h2 and h3 only mailer, so the orders partitions rendezvous gives to h2
// and h3 are listed as unowned; --partitions lists every partition.
func TestClusterHosts(t *testing.T) {
	n := natstest.RunServer(t)
	st := clustertest.Ledger(t)
	h1 := clustertest.Join(t, n.URL(), "h1", st, "mailer", "orders")
	clustertest.Join(t, n.URL(), "h2", st, "mailer")
	clustertest.Join(t, n.URL(), "h3", st, "mailer")
	srv := httptest.NewServer(api.New(api.Deps{Config: config.Default, Cluster: h1.Cluster}).Handler())
	t.Cleanup(srv.Close)

	var c wire.Cluster
	checkfor.Nil(t, 20*time.Second, 50*time.Millisecond, func() error {
		code, out, errOut := runCLI(srv.URL, "cluster", "--json")
		if code != exitOK {
			return fmt.Errorf("berth cluster --json: exit %d, stderr %q", code, errOut)
		}
		c = decodeJSON[wire.Cluster](t, out)
		if len(c.Hosts) == 3 && len(c.Subscriptions) == 2 && len(c.Subscriptions[0].Unowned) == 0 && c.Unowned > 0 {
			return nil
		}
		return fmt.Errorf("want three hosts, mailer all owned: %d hosts, %d subscriptions, %d unowned: %s", len(c.Hosts), len(c.Subscriptions), c.Unowned, out)
	})
	code, out, errOut := runCLI(srv.URL, "cluster", "--wide")
	if code != exitOK {
		t.Fatalf("berth cluster: exit %d, stderr %q", code, errOut)
	}
	orders := c.Subscriptions[1]
	want := []string{
		"3 hosts, seen from h1: lease TTL 3s, 16 partitions per subscription;",
		"HOST", "LEASE AGE", "h1 (this host)", "http://h2.example:8080", "test",
		"SUBSCRIPTION", "h1", "h2", "h3", "UNOWNED", "mailer",
	}
	// Released by h1 (if it claimed them alone before the others joined) or
	// never claimed, and claimed by no one since.
	var released, unclaimed []string
	for _, p := range orders.Partitions {
		switch p.State {
		case wire.PartitionReleased:
			released = append(released, strconv.Itoa(p.Index))
		case wire.PartitionUnclaimed:
			unclaimed = append(unclaimed, strconv.Itoa(p.Index))
		}
	}
	if len(released)+len(unclaimed) != c.Unowned {
		t.Errorf("orders: released %v, unclaimed %v; %d unowned in all", released, unclaimed, c.Unowned)
	}
	if len(released) > 0 {
		want = append(want, "released "+strings.Join(released, ", "))
	}
	if len(unclaimed) > 0 {
		want = append(want, "unclaimed "+strings.Join(unclaimed, ", "))
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("berth cluster lacks %q:\n%s", w, out)
		}
	}
	code, out, _ = runCLI(srv.URL, "cluster", "--partitions", "--wide")
	if rows := strings.Count(out, "\nmailer ") + strings.Count(out, "\norders "); code != exitOK || rows != 2+2*16 ||
		!strings.Contains(out, "PARTITION  STATE") {
		t.Errorf("berth cluster --partitions: exit %d, %d subscription rows, want 2 in the counts and 32 partitions:\n%s", code, rows, out)
	}
}
