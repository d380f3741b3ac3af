package tests

import (
	"errors"
	"fmt"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestConsoleOperatorMorning drives the ops console in headless Chromium at
// 800 px wide, on a host that needs a token, with 30 aggregates parked: the
// page asks for a token, keeps it for the session only, pages and filters
// the parked list, says when a resumed aggregate fails again, shows what a
// skip passes over before it does it, pauses and unpauses a subscription,
// and turns its actions off when the host stops answering.
func TestConsoleOperatorMorning(t *testing.T) {
	svc := newNotifier(t)
	h := newHost(t, hostConfig{NotifyURL: svc.URL(), Extra: fastRetry + authAndLimits})
	h.token = adminToken
	h.uploadNotifier(t, 201)
	svc.set("ghost", behaviour{Unknown: true})
	const parkedN = 30
	for i := 1; i <= parkedN; i++ {
		h.appendShipped(t, fmt.Sprintf("o-p%02d", i), "ghost")
	}
	checkfor.Within(t, 60*time.Second, func() error {
		var page struct {
			Records []parkedRecord `json:"records"`
		}
		r := h.request("GET", "/v1/parked?limit=100", nil)
		if r.Status != 200 {
			return fmt.Errorf("GET /v1/parked: %s", r)
		}
		r.JSON(t, &page)
		if len(page.Records) != parkedN {
			return fmt.Errorf("%d aggregates parked, want %d", len(page.Records), parkedN)
		}
		return nil
	})

	// The parked list filters by error class (a parent class takes its
	// descendants), message text and first-failure time.
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	for _, tc := range []struct {
		query string
		want  int
	}{
		{"class=UnknownBuyer", parkedN},
		{"class=Notification", parkedN}, // UnknownBuyer's parent in the notifier's tree
		{"message=BUYER+GHOST", parkedN},
		{"message=buyer+alice", 0},
		{"failedAfter=" + future, 0},
		{"failedBefore=" + future + "&class=Notification&message=ghost", parkedN},
	} {
		var page struct {
			Records []parkedRecord `json:"records"`
		}
		h.must(200, "GET", "/v1/parked?limit=100&"+tc.query, nil).JSON(t, &page)
		if len(page.Records) != tc.want {
			t.Errorf("GET /v1/parked?%s: %d records, want %d", tc.query, len(page.Records), tc.want)
		}
	}

	// A class no module declares is a typo, not "nothing parked": 400
	// naming the nearest declared class.
	if r := h.request("GET", "/v1/parked?limit=100&class=Unknown", nil); r.Status != 400 || !strings.Contains(string(r.Body), "UnknownBuyer") {
		t.Errorf("GET /v1/parked?class=Unknown: %s, want 400 naming UnknownBuyer", r)
	}

	ctx := newBrowser(t, 120*time.Second, chromedp.WindowSize(800, 900))
	run := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return s
	}
	eval := func(js string) string {
		t.Helper()
		return evaluate(t, ctx, js)
	}
	change := func(id string) {
		t.Helper()
		eval(`document.getElementById("` + id + `").dispatchEvent(new Event("change")); "ok"`)
	}
	rows := func() int {
		t.Helper()
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#parked tbody tr").length`))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// rowsAre says how many rows the parked list shows, on which page,
	// until it shows n (on page, if not ""); nil then.
	rowsAre := func(n int, page string) error {
		t.Helper()
		if got, p := rows(), text("#page"); got != n || page != "" && p != page {
			return fmt.Errorf("%d rows on %q, want %d on %q", got, p, n, page)
		}
		return nil
	}

	// Without a token the page says to sign in, not that the host is down.
	run("open the console", chromedp.Navigate(h.URL+"/console/"), chromedp.WaitVisible(chromedp.CSS("#banner")))
	checkfor.Within(t, 10*time.Second, func() error { return reads("the banner", text("#banner"), "Sign in with a token") })
	// A token an older console kept in local storage moves to session storage.
	eval(`localStorage.setItem("berth-token", "` + adminToken + `"); "ok"`)
	run("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`#parked tbody tr[data-id="o-p01"]`)))
	if got := eval(`String(localStorage.getItem("berth-token")) + "|" + sessionStorage.getItem("berth-token")`); got != "null|"+adminToken {
		t.Errorf("local|session storage = %q, want the token in session storage only", got)
	}
	if hidden := eval(`String(document.getElementById("banner").hidden)`); hidden != "true" {
		t.Errorf("the banner stays up after signing in: %q", text("#banner"))
	}
	// A single host is one line in the Cluster section: it owns every
	// partition; no hosts table, no grid.
	checkfor.Within(t, 10*time.Second, func() error {
		if line := text("#cluster-line"); !strings.HasPrefix(line, "Single host ") {
			return fmt.Errorf("the Cluster section reads %q, want its single-host line", line)
		}
		return nil
	})
	if line := text("#cluster-line"); !strings.Contains(line, "owns all 16 partitions of every subscription") {
		t.Errorf("the Cluster section reads %q", line)
	}
	if hidden := eval(`String(document.getElementById("cluster-detail").hidden)`); hidden != "true" {
		t.Error("a single host shows the cluster's hosts and grid")
	}

	// Paging: 25 a page, then the other 5; no fixed cap.
	run("25 a page", chromedp.SetValue(chromedp.CSS("#f-limit"), "25"))
	change("f-limit")
	checkfor.Within(t, 10*time.Second, func() error { return rowsAre(25, "") })
	run("next page", chromedp.Click(chromedp.CSS("#next-page")))
	checkfor.Within(t, 10*time.Second, func() error { return rowsAre(5, "page 2") })
	if eval(`String(document.getElementById("next-page").disabled)`) != "true" {
		t.Error("next is enabled on the last page")
	}
	run("previous page", chromedp.Click(chromedp.CSS("#prev-page")))
	checkfor.Within(t, 10*time.Second, func() error { return rowsAre(25, "page 1") })

	// Filters go to the server: another aggregate type shows nothing.
	run("filter by type", chromedp.SendKeys(chromedp.CSS("#f-type"), "Invoice"))
	change("f-type")
	checkfor.Within(t, 10*time.Second, func() error {
		if hidden := eval(`String(document.getElementById("parked-empty").hidden)`); hidden != "false" {
			return fmt.Errorf("nothing of type Invoice, yet the empty-list line hidden: %s; %v", hidden, rowsAre(0, ""))
		}
		return rowsAre(0, "")
	})
	eval(`document.getElementById("f-type").value = ""; "ok"`) // SetValue cannot set an empty value
	change("f-type")
	checkfor.Within(t, 10*time.Second, func() error { return rowsAre(25, "") })
	// By error class: one nobody has, then the notifier's parent class.
	run("filter by class", chromedp.SendKeys(chromedp.CSS("#f-class"), "Downstream"))
	change("f-class")
	checkfor.Within(t, 10*time.Second, func() error { return rowsAre(0, "") })
	// A class nobody declares is refused, and the list says so (once the
	// whole name is typed: each key sends a change of its own).
	checkfor.Within(t, 10*time.Second, func() error {
		if msg := eval(`document.getElementById("parked-empty").textContent`); !strings.Contains(msg, "refused") || !strings.Contains(msg, `"Downstream"`) {
			return fmt.Errorf("the empty list after filtering by Downstream says %q, want the refusal", msg)
		}
		return nil
	})
	eval(`document.getElementById("f-class").value = "Notification"; "ok"`)
	change("f-class")
	checkfor.Within(t, 10*time.Second, func() error { return rowsAre(25, "") })
	eval(`document.getElementById("f-class").value = ""; "ok"`)
	change("f-class")

	// At 800 px nothing spills out of the page sideways.
	if got := eval(`String(document.documentElement.scrollWidth <= window.innerWidth)`); got != "true" {
		t.Errorf("the page is wider than the 800 px window: scrollWidth %s, innerWidth %s",
			eval(`String(document.documentElement.scrollWidth)`), eval(`String(window.innerWidth)`))
	}
	// And the parked table fits its section: no sideways scrolling to reach
	// the buttons.
	if got := eval(`(() => { const s = document.querySelector("#parked").parentElement; return s.scrollWidth + " " + s.clientWidth; })()`); func() bool {
		var sw, cw int
		fmt.Sscan(got, &sw, &cw)
		return sw > cw
	}() {
		t.Errorf("the parked table scrolls sideways at 800 px (scrollWidth, clientWidth: %s)", got)
	}
	screenshot(t, ctx, "console-800px.png")

	row := func(id string) string { return `#parked tbody tr[data-type="Order"][data-id="` + id + `"]` }
	// Each record offers its failed attempt's capsule, and the command that
	// replays it; the download is the host's capsule, byte for byte.
	run("capsule link", chromedp.WaitVisible(chromedp.CSS(row("o-p01")+" a.download-capsule")))
	if hint := text(row("o-p01") + " .replay-hint"); hint != "replay with: berth parked replay "+subName+" Order o-p01" {
		t.Errorf("the replay hint reads %q", hint)
	}
	eval(`window.saved = null; HTMLAnchorElement.prototype.click = function () {
		const a = this; fetch(a.href).then(r => r.text()).then(t => { window.saved = {name: a.download, text: t}; }); }; "ok"`)
	run("download capsule", chromedp.Click(chromedp.CSS(row("o-p01")+" a.download-capsule")))
	checkfor.Within(t, 10*time.Second, func() error {
		return reads("the status line", text("#status"), "Downloaded the capsule of Order o-p01")
	})
	want := h.must(200, "GET", parkedPath("o-p01")+"/capsule", nil).Body
	checkfor.Within(t, 10*time.Second, func() error {
		got := eval(`window.saved ? window.saved.name + "\n" + window.saved.text : ""`)
		if got != "capsule-"+subName+"-Order-o-p01.json\n"+string(want) {
			return fmt.Errorf("the download saved %.200q; want the host's capsule as capsule-%s-Order-o-p01.json", got, subName)
		}
		return nil
	})

	// A resume that fails again says so.
	run("resume o-p01", chromedp.Click(chromedp.CSS(row("o-p01")+" button.resume")))
	checkfor.Within(t, 30*time.Second, func() error {
		return reads("the status line", text("#status"), "Order o-p01 was resumed but failed again: the notification service does not know buyer ghost")
	})

	// Skip says what it passes over before it does it, and passes exactly that.
	eval(`window.confirmed = ""; window.confirm = m => { window.confirmed = m; return true; }; "ok"`)
	run("skip o-p02", chromedp.WaitVisible(chromedp.CSS(row("o-p02")+" .held:not(:empty)")),
		chromedp.Click(chromedp.CSS(row("o-p02")+" button.skip")),
		chromedp.WaitNotPresent(chromedp.CSS(row("o-p02"))))
	if msg := eval(`window.confirmed`); !strings.Contains(msg, "Skip Order o-p02: version 1 (1 commit) will not be handled") {
		t.Errorf("the skip's confirmation reads %q", msg)
	}
	checkfor.Within(t, 20*time.Second, func() error {
		return h.answers(parkedPath("o-p02"), 404)
	})

	// A bulk skip of what the filters match: the page asks the host for the
	// count first (a dry run) and says it before anything changes.
	eval(`document.getElementById("f-class").value = "UnknownBuyer"; "ok"`)
	change("f-class")
	eval(`window.prompted = ""; window.prompt = m => { window.prompted = m; return "ghost is a test buyer"; }; "ok"`)
	run("skip all", chromedp.Click(chromedp.CSS("#bulk-skip")))
	checkfor.Within(t, 10*time.Second, func() error {
		if eval(`window.prompted`) == "" {
			return fmt.Errorf("no prompt for the bulk skip yet; the status line reads %q", text("#status"))
		}
		return nil
	})
	if msg := eval(`window.prompted`); !strings.Contains(msg, "Skip 29 parked aggregates (class UnknownBuyer)") {
		t.Errorf("the bulk skip asked %q; want the dry run's count, 29 (30 parked, one skipped), and the filter", msg)
	}
	checkfor.Within(t, 30*time.Second, func() error {
		s := text("#jobs tbody")
		return errors.Join(reads("the jobs table", s, "29 of 29"), reads("the jobs table", s, "done"), reads("the jobs table", s, "ghost is a test buyer"))
	})
	checkfor.Within(t, 10*time.Second, func() error { return rowsAre(0, "") })
	if n := len(h.parked(t)); n != 0 {
		t.Errorf("%d still parked after the bulk skip", n)
	}

	// Pause and unpause from the subscriptions table.
	sub := `#subs tbody tr[data-name="` + subName + `"]`
	eval(`window.prompt = () => ""; "ok"`) // pause until unpaused
	run("pause", chromedp.Click(chromedp.CSS(sub+" button.pause")), chromedp.WaitVisible(chromedp.CSS(sub+" button.unpause")))
	if st := h.subscription(t); st.State != "paused" {
		t.Errorf("after Pause the host says %q", st.State)
	}
	run("unpause", chromedp.Click(chromedp.CSS(sub+" button.unpause")), chromedp.WaitVisible(chromedp.CSS(sub+" button.pause")))
	if st := h.subscription(t); st.State != "running" {
		t.Errorf("after Unpause the host says %q", st.State)
	}

	// The host goes away: the page says so and every action is off.
	h.Stop()
	checkfor.Within(t, 15*time.Second, func() error { return reads("the banner", text("#banner"), "Host unreachable since") })
	if got := eval(`String([...document.querySelectorAll("button.action")].every(b => b.disabled)) + " " + document.querySelectorAll("button.action").length`); !strings.HasPrefix(got, "true ") || got == "true 0" {
		t.Errorf("with the host down, action buttons disabled / count: %s", got)
	}
	screenshot(t, ctx, "console-unreachable.png")
}
