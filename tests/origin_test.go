package tests

import (
	"context"
	"fmt"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"html/template"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// hostilePage tries every write of the API against the host at .Host from
// another origin: fetches in no-cors and cors mode (text/plain bodies, so
// that no preflight asks first) and form posts of each encoding into hidden
// frames. It sets window.done when every attempt has settled.
var hostilePage = template.Must(template.New("page").Parse(`<!doctype html>
<meta charset="utf-8"><title>a page on another origin</title>
<body><script>
"use strict";
const host = {{.Host}}, writes = {{.Writes}};
window.results = [];
async function attempt(label, url, init) {
  try {
    const r = await fetch(url, init);
    results.push(label + ": " + r.type + " " + r.status);
  } catch (e) {
    results.push(label + ": " + e.name);
  }
}
function post(w, enctype, i) {
  return new Promise(resolve => {
    const frame = document.createElement("iframe");
    frame.name = "f" + i;
    document.body.appendChild(frame); // loads about:blank at once
    frame.addEventListener("load", resolve, {once: true}); // the form's answer
    const form = document.createElement("form");
    form.method = "POST";
    form.action = host + w.path;
    form.enctype = enctype;
    form.target = frame.name;
    const input = document.createElement("input");
    input.type = "hidden";
    // As text/plain, name=value is the body: a JSON object, '=' inside a string.
    [input.name, input.value] = enctype === "text/plain" ? w.form : ["reason", "evil"];
    form.appendChild(input);
    document.body.appendChild(form);
    form.submit();
  });
}
(async () => {
  for (const w of writes) {
    const init = {method: w.method};
    if (w.body) init.body = w.body; // a string: sent as text/plain;charset=UTF-8
    await attempt("no-cors " + w.method + " " + w.path, host + w.path, {...init, mode: "no-cors"});
    await attempt("cors " + w.method + " " + w.path, host + w.path, {...init, mode: "cors"});
  }
  let i = 0;
  const frames = [];
  for (const w of writes.filter(w => w.method === "POST")) {
    for (const enctype of ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data"]) {
      frames.push(post(w, enctype, i++));
    }
  }
  await Promise.all(frames);
  results.push("forms: " + frames.length + " loaded");
  window.done = true;
})();
</script>
`))

// pageWrite is one write the hostile page tries.
type pageWrite struct {
	Method string    `json:"method"`
	Path   string    `json:"path"`
	Body   string    `json:"body"` // "" for none
	Form   [2]string `json:"form"` // the input's name and value of a text/plain form post
}

// TestCrossOriginPageCannotDriveTheHost opens, in Chromium, a page served
// from another local port whose script tries every write — append an event,
// reload, resume, skip, pause, reset, delete the module — as no-cors and
// cors fetches and as form posts; then a DNS-rebinding page (a foreign name
// mapped to 127.0.0.1, on the host's own port) reads and writes as if
// same-origin, and a plain client sends a foreign Host. Each is refused and,
// seen through REST afterwards, nothing changed: no event appended, the
// subscription neither paused nor reset, the record still parked, the
// module still there, the configuration not reloaded. The console's own
// buttons still work: a Skip from the console, opened at localhost, goes
// through.
func TestCrossOriginPageCannotDriveTheHost(t *testing.T) {
	svc := newNotifier(t)
	h := newHost(t, hostConfig{NotifyURL: svc.URL(), Extra: fastRetry})
	h.uploadNotifier(t, 201)
	svc.set("ghost", behaviour{Unknown: true})
	h.appendShipped(t, "o-ok", "alice")
	h.appendShipped(t, "o-x", "ghost")
	svc.waitNotified(t, key("o-ok", 1), 20*time.Second)
	h.waitParked(t, "o-x", 20*time.Second)
	checkfor.Within(t, 10*time.Second, func() error { return caughtUp(h.subscription(t)) })
	// A reload that went through would show: the file now says 250ms.
	writeFile(t, h.Config, strings.Replace(hostConfig{NotifyURL: svc.URL(), Extra: fastRetry}.TOML(), `"100ms"`, `"250ms"`, 1))

	// state is what the writes would change, as REST shows it.
	state := func() string {
		st := h.subscription(t)
		rec := h.request("GET", "/v1/subscriptions/"+subName+"/parked/Order/o-x", nil)
		var parked parkedRecord
		if rec.Status == 200 {
			rec.JSON(t, &parked)
		}
		return fmt.Sprintf("subscription %s checkpoint %d head %d initial-backoff %v; o-x %d %s (%d history); module %d; events o-evil %d, o-form %d",
			st.State, st.Checkpoint, st.Head, st.Retry["initial-backoff"].Value, rec.Status, parked.State, len(parked.History),
			h.request("GET", "/v1/modules/"+moduleName, nil).Status,
			h.request("GET", "/v1/aggregates/Order/o-evil/events", nil).Status,
			h.request("GET", "/v1/aggregates/Order/o-form/events", nil).Status)
	}
	before := state()
	if !strings.Contains(before, "subscription running") || !strings.Contains(before, "o-x 200 ") ||
		!strings.Contains(before, "initial-backoff 100ms") || !strings.Contains(before, "module 200") || !strings.Contains(before, "o-evil 404, o-form 404") {
		t.Fatalf("before the page: %s", before)
	}

	sub := "/v1/subscriptions/" + subName
	parked := sub + "/parked/Order/o-x"
	reason := [2]string{`{"reason":"evil`, `"}`}
	writes := []pageWrite{
		{"POST", "/v1/events", `{"aggregateType":"Order","aggregateId":"o-evil","events":[{"type":"OrderShipped","data":{}}]}`,
			[2]string{`{"aggregateType":"Order","aggregateId":"o-form","events":[{"type":"OrderShipped","data":{"x":"`, `"}}]}`}},
		{"POST", "/v1/config/reload", "", reason},
		{"POST", parked + "/resume", `{"reason":"evil"}`, reason},
		{"POST", parked + "/skip", `{"reason":"evil"}`, reason},
		{"POST", sub + "/pause", "", reason},
		{"POST", sub + "/reset", `{"position":1}`, [2]string{`{"position":1,"x":"`, `"}`}},
		{"DELETE", "/v1/modules/" + moduleName, "", reason},
	}
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if err := hostilePage.Execute(w, map[string]any{"Host": h.URL, "Writes": writes}); err != nil {
			t.Errorf("page: %v", err)
		}
	}))
	t.Cleanup(page.Close)

	hostURL, err := url.Parse(h.URL)
	if err != nil {
		t.Fatal(err)
	}
	ctx := newBrowser(t, 90*time.Second, chromedp.Flag("host-resolver-rules", "MAP evil.test 127.0.0.1"))
	if err := chromedp.Do(ctx,
		chromedp.Navigate(page.URL+"/"),
		chromedp.Poll[chromedp.Void](`window.done === true`, chromedp.WithPollingTimeout(60*time.Second)),
	); err != nil {
		t.Fatalf("run the page on another origin: %v", err)
	}
	results, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`window.results`))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("what the page saw:\n%s", strings.Join(results, "\n"))
	if after := state(); after != before {
		t.Errorf("a page on another origin changed the host:\nbefore %s\nafter  %s", before, after)
	}
	// Each POST reached the host five times (two fetches, three forms) and
	// was refused there, not by the browser; the DELETE never left it (no
	// simple request can carry one).
	for _, w := range writes {
		if w.Method != "POST" {
			continue
		}
		re := regexp.MustCompile(`msg="refused a cross-origin request" method=POST path=` + regexp.QuoteMeta(w.Path) + ` `)
		checkfor.Within(t, 10*time.Second, func() error {
			if n := len(re.FindAllString(h.Stderr(), -1)); n < 5 {
				return fmt.Errorf("the host refused %d cross-origin POST %s, want 5", n, w.Path)
			}
			return nil
		})
	}

	// DNS rebinding: evil.test resolves to 127.0.0.1, so a page the browser
	// takes for http://evil.test:<the host's port> is same-origin with the
	// API and could read its answers. The host refuses them all for their Host.
	rebound := "http://evil.test:" + hostURL.Port()
	if err := chromedp.Do(ctx, chromedp.Navigate(rebound+"/v1/parked")); err != nil {
		t.Fatalf("open the rebound page: %v", err)
	}
	body, err := chromedp.Run(ctx, chromedp.Text("body"))
	if err != nil {
		t.Fatalf("read the rebound page: %v", err)
	}
	if !strings.Contains(body, "foreign-host") || strings.Contains(body, "o-x") {
		t.Errorf("GET /v1/parked as evil.test shows %q, want a foreign-host problem and no record", body)
	}
	script := `Promise.all([
	  fetch("/v1/parked"),
	  fetch("` + parked + `"),
	  fetch("/v1/events", {method: "POST", headers: {"Content-Type": "application/json"}, body: '{"aggregateType":"Order","aggregateId":"o-evil","events":[{"type":"OrderShipped"}]}'}),
	  fetch("` + sub + `/pause", {method: "POST"}),
	  fetch("` + sub + `/reset", {method: "POST", headers: {"Content-Type": "application/json"}, body: '{"position":1}'}),
	  fetch("` + parked + `/skip", {method: "POST", headers: {"Content-Type": "application/json"}, body: '{"reason":"evil"}'}),
	  fetch("/v1/config/reload", {method: "POST"}),
	  fetch("/v1/modules/` + moduleName + `", {method: "DELETE"}),
	]).then(rs => rs.map(r => r.status).join(" "))`
	statuses, err := chromedp.Run(ctx, chromedp.Evaluate[string](script, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("the rebound page's requests: %v", err)
	}
	if statuses != "403 403 403 403 403 403 403 403" {
		t.Errorf("the rebound page's reads and writes answered %s, want 403 each", statuses)
	}
	// The same from a plain client that sends a foreign Host.
	for _, r := range []struct{ method, path string }{{"DELETE", "/v1/modules/" + moduleName}, {"POST", sub + "/pause"}, {"GET", "/v1/parked"}} {
		req, err := http.NewRequestWithContext(context.Background(), r.method, h.URL+r.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = "evil.test:" + hostURL.Port()
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 403 || !strings.Contains(string(b), "foreign-host") {
			t.Errorf("%s %s with Host evil.test: %d %s, want 403 foreign-host", r.method, r.path, resp.StatusCode, b)
		}
	}
	if after := state(); after != before {
		t.Errorf("a DNS-rebinding page changed the host:\nbefore %s\nafter  %s", before, after)
	}

	// The console's own buttons work, opened at localhost as well.
	row := chromedp.CSS(`#parked tbody tr[data-key="` + subName + `/Order/o-x"]`)
	if err := chromedp.Do(ctx,
		chromedp.Navigate("http://localhost:"+hostURL.Port()+"/console/"),
		chromedp.WaitVisible(row),
		chromedp.Evaluate[chromedp.Void](`window.confirm = () => true`), // the Skip button asks first
		chromedp.SendKeys(row+" input.reason", "not needed"),
		chromedp.Click(row+" button.skip"),
		chromedp.WaitNotPresent(row),
	); err != nil {
		t.Fatalf("skip from the console: %v", err)
	}
	if r := h.request("GET", parked, nil); r.Status != 404 {
		t.Errorf("o-x after the console's Skip: %s, want it no longer parked", r)
	}
	checkfor.Within(t, 5*time.Second, func() error { return reads("the host's log", h.Stderr(), `reason="not needed"`) })
}
