package tests

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/berthhq/berth/internal/testing/checkfor"
)

// TestConsoleGroups drives the ops console in headless Chromium: parks
// for two causes show as two failure groups, the biggest first with its
// count and masked message; "Records ›" on a group lists exactly its
// records below, and clearing the group lists every record again.
func TestConsoleGroups(t *testing.T) {
	const ghosts, down = 6, 3
	svc := newNotifier(t)
	h := newHost(t, hostConfig{NotifyURL: svc.URL(), Extra: groupsConfig})
	h.uploadNotifier(t, 201)
	for i := range ghosts {
		svc.set(fmt.Sprintf("ghost-%d", i), behaviour{Unknown: true})
		h.appendShipped(t, fmt.Sprintf("o-ghost-%d", i), fmt.Sprintf("ghost-%d", i))
	}
	for i := range down {
		svc.set(fmt.Sprintf("down-%d", i), behaviour{Fail: 1 << 30})
		h.appendShipped(t, fmt.Sprintf("o-down-%d", i), fmt.Sprintf("down-%d", i))
	}
	checkfor.Within(t, 30*time.Second, func() error { return groupsAre(h.groups(t), ghosts, down) })

	ctx := newBrowser(t, 90*time.Second)
	count := func(sel string) func() error {
		return func() error {
			n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll(`+"`"+sel+"`"+`).length`))
			if err != nil {
				return err
			}
			if n == 0 {
				return fmt.Errorf("no %s", sel)
			}
			return nil
		}
	}
	rows := func(sel string, want int) func() error {
		return func() error {
			n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll(`+"`"+sel+"`"+`).length`))
			if err == nil && n != want {
				err = fmt.Errorf("%d of %s, want %d", n, sel, want)
			}
			return err
		}
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(h.URL+"/console/")); err != nil {
		t.Fatalf("open the console: %v", err)
	}
	checkfor.Within(t, 20*time.Second, rows("#groups-table tbody tr", 2))
	first, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#groups-table tbody tr:first-child")))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{fmt.Sprint(ghosts), "the notification service does not know buyer {}", "UnknownBuyer", "shipment-notifier v1 ×6"} {
		if !strings.Contains(first, want) {
			t.Errorf("the first group %q should show %q", first, want)
		}
	}
	checkfor.Within(t, 20*time.Second, rows("#parked tbody tr[data-key]", ghosts+down))
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#groups-table tbody tr:first-child button.records"))); err != nil {
		t.Fatalf("click Records: %v", err)
	}
	checkfor.Within(t, 20*time.Second, rows("#parked tbody tr[data-key]", ghosts))
	checkfor.Within(t, 5*time.Second, count(`#parked tbody tr[data-key*="o-ghost-"]`))
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#f-group-clear"))); err != nil {
		t.Fatalf("clear the group: %v", err)
	}
	checkfor.Within(t, 20*time.Second, rows("#parked tbody tr[data-key]", ghosts+down))
}
