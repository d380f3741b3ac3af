package tests

import (
	"context"
	"errors"
	"fmt"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/api"
	"github.com/berthhq/berth/assembly"
	"github.com/berthhq/berth/cluster"
	"github.com/berthhq/berth/cluster/clustertest"
	"github.com/berthhq/berth/config"
	"github.com/berthhq/berth/internal/testing/natstest"
	"github.com/chromedp/chromedp"
)

// notOn counts the partitions of sub that Assign gives to hosts other
// than host.
func notOn(sub, host string, hosts ...string) int {
	n := 0
	for _, h := range cluster.Assign(sub, cluster.DefaultPartitions, hosts) {
		if h != host {
			n++
		}
	}
	return n
}

// TestConsoleCluster drives the console's Cluster section in headless
// Chromium at 800 px, over the API in this process with a real
// cluster.Cluster (h1) beside two more (h2, h3) on one in-process NATS node
// (cluster/clustertest),
// all claiming in the host's Badger ledger; the rest of the API is a whole
// host (assembly). h1 shares out "mailer" and "orders", h2 and h3 only
// "mailer" — as when a module has not reached every host — so the orders
// partitions rendezvous gives to h2 and h3 stay unowned: the page counts
// and marks them. Then h3 dies and leaves the hosts table, once h2 takes
// orders too every partition is owned, and with NATS down the section says
// so while the rest of the page goes on.
func TestConsoleCluster(t *testing.T) {
	n := natstest.RunServer(t)
	cfg, err := config.Parse(fmt.Appendf(nil, "[server]\ndata-dir = %q\n", t.TempDir()), "berth.toml")
	if err != nil {
		t.Fatal(err)
	}
	asm, err := assembly.Open(t.Context(), cfg, assembly.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { asm.Close(context.Background()) }) // after the clusters' cleanups
	h1 := clustertest.Join(t, n.URL(), "h1", asm.Ledger, "mailer", "orders").Cluster
	h2 := clustertest.Join(t, n.URL(), "h2", asm.Ledger, "mailer").Cluster
	h3 := clustertest.Join(t, n.URL(), "h3", asm.Ledger, "mailer")
	deps := api.DepsOf(asm)
	deps.Cluster = h1 // the view of the joined hosts, not asm's single host
	srv := httptest.NewServer(api.New(deps).Handler())
	t.Cleanup(srv.Close)

	ctx := newBrowser(t, 120*time.Second, chromedp.WindowSize(800, 900))
	eval := func(js string) string {
		t.Helper()
		return evaluate(t, ctx, js)
	}
	text := func(sel string) string {
		t.Helper()
		return eval(`(document.querySelector(` + fmt.Sprintf("%q", sel) + `) || {}).textContent || ""`)
	}
	count := func(sel string) int {
		t.Helper()
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll(`+fmt.Sprintf("%q", sel)+`).length`))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/console/"), chromedp.WaitVisible(chromedp.CSS("#cluster-hosts"))); err != nil {
		t.Fatalf("open the console: %v", err)
	}

	unclaimed := notOn("orders", "h1", "h1", "h2", "h3")
	if unclaimed == 0 {
		t.Fatal("rendezvous gives every orders partition to h1; the test needs some elsewhere")
	}
	mailer, orders := `#cluster-subs tbody tr[data-name="mailer"]`, `#cluster-subs tbody tr[data-name="orders"]`
	checkfor.Within(t, 20*time.Second, func() error {
		hosts, mailerUnowned, ordersUnowned, line := count("#cluster-hosts tbody tr"), text(mailer+" td.unowned-list"), count(orders+" .part.unowned"), text("#cluster-line")
		if hosts != 3 || mailerUnowned != "none" || ordersUnowned != unclaimed || !strings.Contains(line, fmt.Sprintf("%d partitions unowned", unclaimed)) {
			return fmt.Errorf("%d hosts, mailer unowned %q, %d of orders unowned (want 3, none, %d); the line %q", hosts, mailerUnowned, ordersUnowned, unclaimed, line)
		}
		return nil
	})
	line := text("#cluster-line")
	for _, want := range []string{"3 hosts", "lease TTL 3s", "16 partitions per subscription", "seen from h1"} {
		if !strings.Contains(line, want) {
			t.Errorf("the cluster line %q should say %q", line, want)
		}
	}
	if self := text(`#cluster-hosts tr[data-host="h1"]`); !strings.Contains(self, "(this host)") || !strings.Contains(self, "http://h1.example:8080") ||
		!strings.Contains(self, " ago") || !strings.Contains(self, "test") {
		t.Errorf("h1's row reads %q", self)
	}
	if n := count(orders + " td.unowned"); n != 1 {
		t.Errorf("the orders row's unowned cell is not marked (%d marked cells)", n)
	}
	// Released by h1 (if it claimed them alone before the others joined) or
	// never claimed, and claimed by no one since.
	if n := count(orders + ` .part[data-state="released"], ` + orders + ` .part[data-state="unclaimed"]`); n != unclaimed {
		t.Errorf("%d orders partitions shown released or unclaimed, want %d", n, unclaimed)
	}
	// Unfolded, a subscription lists each partition with its owner, and
	// stays unfolded as the page refreshes.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(mailer+" summary"))); err != nil {
		t.Fatalf("unfold mailer: %v", err)
	}
	status := text("#status")
	checkfor.Within(t, 10*time.Second, func() error {
		if now := text("#status"); now == status {
			return fmt.Errorf("no refresh: the status line still reads %q", now)
		}
		return nil
	})
	if open := eval(`String(document.querySelector(` + fmt.Sprintf("%q", mailer+" details") + `).open)`); open != "true" {
		t.Error("the unfolded mailer folded up at a refresh")
	}
	if chip := text(mailer + ` .part[data-index="0"]`); !strings.HasPrefix(chip, "0: h") {
		t.Errorf("mailer's partition 0 reads %q, want its owner", chip)
	}
	if got := eval(`String(document.documentElement.scrollWidth <= window.innerWidth)`); got != "true" {
		t.Errorf("the page is wider than the 800 px window: scrollWidth %s", eval(`String(document.documentElement.scrollWidth)`))
	}
	screenshot(t, ctx, "console-cluster.png")

	// h3 dies without a goodbye: once its lease runs out it leaves the
	// table and h1 and h2 own all of mailer.
	h3.Conn.Close()
	checkfor.Within(t, 20*time.Second, func() error {
		hosts, h3, mailerUnowned, ordersUnowned := count("#cluster-hosts tbody tr"), count(`#cluster-hosts tr[data-host="h3"]`), text(mailer+" td.unowned-list"), count(orders+" .part.unowned")
		if want := notOn("orders", "h1", "h1", "h2"); hosts != 2 || h3 != 0 || mailerUnowned != "none" || ordersUnowned != want {
			return fmt.Errorf("%d hosts (h3's rows %d), mailer unowned %q, %d of orders unowned; want 2 (0), none, %d", hosts, h3, mailerUnowned, ordersUnowned, want)
		}
		return nil
	})
	// h2 takes orders too (its module arrived): every partition is owned.
	if err := h2.SetSubscriptions(t.Context(), []string{"mailer", "orders"}); err != nil {
		t.Fatal(err)
	}
	checkfor.Within(t, 20*time.Second, func() error {
		if n := count("#cluster-subs .part.unowned"); n != 0 {
			return fmt.Errorf("%d partitions shown unowned; the line %q", n, text("#cluster-line"))
		}
		return reads("the cluster line", text("#cluster-line"), "every partition owned")
	})
	screenshot(t, ctx, "console-cluster-owned.png")

	// NATS goes down: the section says so, keeping its last tables greyed,
	// and the rest of the page (this host's Badger parts) goes on as it was.
	n.Shutdown()
	checkfor.Within(t, 20*time.Second, func() error {
		line := text("#cluster-line")
		return errors.Join(reads("the cluster line", line, "The cluster's state is unavailable"), reads("the cluster line", line, "NATS JetStream"),
			reads("the cluster line", line, "cluster-unavailable"), reads("the cluster line", line, "what the host last answered"))
	})
	if stale := eval(`String(document.getElementById("cluster").classList.contains("stale-cluster"))`); stale != "true" {
		t.Error("the Cluster section's last tables are not marked stale")
	}
	if banner := eval(`String(document.getElementById("banner").hidden)`); banner != "true" {
		t.Errorf("NATS down raised the page's banner: %q", text("#banner"))
	}
	n.Restart() // so that the hosts leave at once when the test ends
}
