package tests

import (
	"context"
	"errors"
	"fmt"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

const chromium = "/usr/bin/chromium"

// TestConsoleResume drives the ops console in headless Chromium: an aggregate
// parked for an unknown buyer shows up in the page; after the service learns
// the buyer, the operator types a reason and clicks Resume, the row goes away
// and the buyer is notified with the parked event's invocation key.
func TestConsoleResume(t *testing.T) {
	svc := newNotifier(t)
	h := newHost(t, hostConfig{NotifyURL: svc.URL(), Extra: fastRetry})
	h.uploadNotifier(t, 201)
	svc.set("ghost", behaviour{Unknown: true})
	h.appendShipped(t, "o-c1", "ghost")
	h.appendShipped(t, "o-c2", "alice")
	h.waitParked(t, "o-c1", 20*time.Second)
	svc.waitNotified(t, key("o-c2", 1), 20*time.Second)

	ctx := newBrowser(t, 90*time.Second)
	text := func(sel chromedp.CSS) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(sel))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return s
	}

	row := chromedp.CSS(`#parked tbody tr[data-key="` + subName + `/Order/o-c1"]`)
	sub := chromedp.CSS(`#subs tbody tr[data-name="` + subName + `"]`)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(h.URL+"/console/"),
		chromedp.WaitVisible(row),
		chromedp.WaitVisible(row+" .held:not(:empty)"),
		chromedp.WaitVisible(sub),
	); err != nil {
		t.Fatalf("open the console: %v", err)
	}
	rowText, subText := text(row), text(sub)
	for _, want := range []string{"Order o-c1", "version 1, event 1", "holds back nothing later", "does not know buyer ghost", "UnknownBuyer", "in shipment-notifier v1"} {
		if !strings.Contains(rowText, want) {
			t.Errorf("parked row %q should show %q", rowText, want)
		}
	}
	if !strings.Contains(subText, moduleName) || !strings.Contains(subText, "running") {
		t.Errorf("subscription row %q should show the module and its state", subText)
	}
	// The record's history unfolds in the row, and stays unfolded as the page
	// refreshes.
	if err := chromedp.Do(ctx, chromedp.Click(row+" details.history summary")); err != nil {
		t.Fatalf("unfold the history: %v", err)
	}
	checkfor.Within(t, 5*time.Second, func() error {
		return errors.Join(reads("the unfolded history", text(row+" details.history ol"), "parked after 1 attempt"),
			reads("the unfolded detail", text(row+" details.history .detail"), "stopped at: OrderShipped"))
	})
	screenshot(t, ctx, "console-parked.png")

	// Fix the cause, then resume from the page. The operator types a reason
	// and takes their time: the page's refreshes (every 2s) keep the row, the
	// typed text and the focus.
	svc.set("ghost", behaviour{})
	const reason = "ghost registered"
	if err := chromedp.Do(ctx, chromedp.SendKeys(row+" input.reason", reason)); err != nil {
		t.Fatalf("type a reason: %v", err)
	}
	status := text("#status")
	checkfor.Within(t, 10*time.Second, func() error {
		now := text("#status")
		if now != status && strings.HasPrefix(now, "updated") {
			if status != "" && strings.HasPrefix(status, "updated") {
				return nil
			}
			status = now
		}
		return fmt.Errorf("the status line reads %q, last refresh seen %q: want two refreshes", now, status)
	})
	focused, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.activeElement.className`))
	if err != nil {
		t.Fatalf("read the focus: %v", err)
	}
	typed, err := chromedp.Run(ctx, chromedp.Value(row+" input.reason"))
	if err != nil {
		t.Fatalf("read the reason field: %v", err)
	}
	if focused != "reason" || typed != reason {
		t.Errorf("after the page refreshed, focus is on %q and the reason reads %q; want the reason field, %q", focused, typed, reason)
	}
	if err := chromedp.Do(ctx, chromedp.Click(row+" button.resume")); err != nil {
		t.Fatalf("resume in the console: %v", err)
	}
	svc.waitNotified(t, key("o-c1", 1), 20*time.Second)
	if err := chromedp.Do(ctx, chromedp.WaitNotPresent(row)); err != nil {
		t.Fatalf("the parked row should go away: %v", err)
	}
	checkfor.Within(t, 5*time.Second, func() error { return reads("the host's log", h.Stderr(), `reason="`+reason+`"`) })
	if n := svc.notified(key("o-c1", 1)); n != 1 {
		t.Errorf("o-c1 notified %d times, want 1", n)
	}
	if list := h.parked(t); len(list) != 0 {
		t.Errorf("GET /v1/parked after the resume: %+v", list)
	}
	screenshot(t, ctx, "console-resumed.png")
}

// TestConsoleOddIDs skips and resumes, from the console in headless
// Chromium, aggregates whose ids hold "/" and "%" and differ only in how
// they would be escaped: each button reaches its own aggregate and no other.
func TestConsoleOddIDs(t *testing.T) {
	svc := newNotifier(t)
	h := newHost(t, hostConfig{NotifyURL: svc.URL(), Extra: fastRetry})
	h.uploadNotifier(t, 201)
	svc.set("ghost", behaviour{Unknown: true})
	const skipped, resumed, other = "a/b%2Fc", "a%2Fb/c", "a/b/c"
	for _, id := range []string{skipped, resumed, other} {
		h.appendShipped(t, id, "ghost")
	}
	records := map[string]string{}
	for _, id := range []string{skipped, resumed, other} {
		checkfor.Within(t, 20*time.Second, func() error { return h.answers(parkedPath(id), 200) })
		records[id] = string(h.must(200, "GET", parkedPath(id), nil).Body)
	}
	svc.set("ghost", behaviour{})

	ctx := newBrowser(t, 90*time.Second)
	row := func(id string) string { return `#parked tbody tr[data-type="Order"][data-id="` + id + `"]` }
	if err := chromedp.Do(ctx,
		chromedp.Navigate(h.URL+"/console/"),
		chromedp.WaitVisible(chromedp.CSS(row(skipped))),
		chromedp.WaitVisible(chromedp.CSS(row(resumed))),
		chromedp.WaitVisible(chromedp.CSS(row(other))),
	); err != nil {
		t.Fatalf("open the console: %v", err)
	}
	// The history's detail is fetched from the record's own path.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(row(skipped)+" details.history summary"))); err != nil {
		t.Fatalf("unfold the history: %v", err)
	}
	checkfor.Within(t, 5*time.Second, func() error {
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(row(skipped)+" details.history .detail")))
		if err != nil {
			return err
		}
		return reads("the unfolded detail of "+skipped, s, "stopped at: OrderShipped")
	})
	// Skip asks for a confirmation; the test gives it.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.confirm = () => true; true`)); err != nil {
		t.Fatalf("answer confirm: %v", err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(row(skipped)+" button.skip")), chromedp.WaitNotPresent(chromedp.CSS(row(skipped)))); err != nil {
		t.Fatalf("skip %s in the console: %v", skipped, err)
	}
	checkfor.Within(t, 20*time.Second, func() error {
		return h.answers(parkedPath(skipped), 404)
	})
	for _, id := range []string{resumed, other} {
		if got := string(h.must(200, "GET", parkedPath(id), nil).Body); got != records[id] {
			t.Errorf("the skip of %q changed the record of %q:\nbefore %s\nafter  %s", skipped, id, records[id], got)
		}
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(row(resumed)+" button.resume")), chromedp.WaitNotPresent(chromedp.CSS(row(resumed)))); err != nil {
		t.Fatalf("resume %s in the console: %v", resumed, err)
	}
	svc.waitNotified(t, key(resumed, 1), 20*time.Second)
	if got := string(h.must(200, "GET", parkedPath(other), nil).Body); got != records[other] {
		t.Errorf("the resume of %q changed the record of %q:\nbefore %s\nafter  %s", resumed, other, records[other], got)
	}
	if n := svc.notified(key(skipped, 1)); n != 0 {
		t.Errorf("the skipped %q was notified %d times", skipped, n)
	}
	screenshot(t, ctx, "console-odd-ids.png")
}

// screenshot saves the full page to the test's artifact directory
// (go test -artifacts keeps it).
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // quality 100: a PNG
	if err != nil {
		t.Errorf("screenshot: %v", err)
		return
	}
	path := filepath.Join(t.ArtifactDir(), name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Errorf("screenshot: %v", err)
		return
	}
	t.Logf("screenshot: %s", path)
}
