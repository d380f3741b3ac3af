package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/internal/testing/syncbuf"
	"github.com/berthhq/berth/wasm/abi"
)

const (
	subName    = "ShipmentNotifier.onOrderShipped"
	moduleName = "shipment-notifier"
)

// hostProc is one running `host serve` process.
type hostProc struct {
	t       testing.TB
	cmd     *exec.Cmd
	URL     string
	Data    string
	Config  string
	stderr  *syncbuf.Buffer
	done    chan struct{}
	waitErr error
	token   string      // sent as a bearer token by the request helpers, when set
	serving chan string // the URL, once the host logs that it serves
}

var servingRE = regexp.MustCompile(`msg="berth is serving" url=(http://\S+)`)

// startHost runs the binary on data with the config file at configPath (which
// the caller wrote) and waits until it serves. The process is stopped with
// SIGTERM at cleanup; its stderr is printed when the test failed.
func startHost(t testing.TB, data, configPath string) *hostProc {
	t.Helper()
	return startHostArgs(t, data, configPath, "serve", "--config", configPath, "--data", data, "--listen", "127.0.0.1:0")
}

// startHostArgs runs the binary with args and waits until it serves.
func startHostArgs(t testing.TB, data, configPath string, args ...string) *hostProc {
	t.Helper()
	h := spawnHost(t, data, configPath, args...)
	if err := h.awaitServing(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	return h
}

// spawnHost runs the binary with args and returns at once; awaitServing
// waits until it serves. Hosts that must start at the same moment are
// spawned one after another, then awaited.
func spawnHost(t testing.TB, data, configPath string, args ...string) *hostProc {
	t.Helper()
	return spawnCmd(t, data, configPath, exec.Command(hostBin, args...))
}

// spawnCmd is spawnHost with the command that runs the binary (in a
// network namespace, say).
func spawnCmd(t testing.TB, data, configPath string, cmd *exec.Cmd) *hostProc {
	t.Helper()
	h := &hostProc{t: t, Data: data, Config: configPath, stderr: &syncbuf.Buffer{}, done: make(chan struct{}),
		serving: make(chan string, 1)}
	h.cmd = cmd
	pr, pw := io.Pipe()
	h.cmd.Stderr = pw
	h.cmd.Stdout = h.stderr
	if err := h.cmd.Start(); err != nil {
		t.Fatalf("start host: %v", err)
	}
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			h.stderr.Write([]byte(line + "\n"))
			if m := servingRE.FindStringSubmatch(line); m != nil && !sent {
				h.serving <- m[1]
				sent = true
			}
		}
		io.Copy(io.Discard, pr)
	}()
	go func() {
		h.waitErr = h.cmd.Wait()
		pw.Close()
		close(h.done)
	}()
	t.Cleanup(func() {
		h.Stop()
		if t.Failed() {
			t.Logf("host %s stderr:\n%s", h.URL, h.stderr.String())
		}
	})
	return h
}

// awaitServing waits until the host spawned by spawnHost serves, and sets
// its URL; an error with its stderr if it exits first or takes longer than
// within.
func (h *hostProc) awaitServing(within time.Duration) error {
	select {
	case h.URL = <-h.serving:
		return nil
	case <-h.done:
		return fmt.Errorf("host exited before serving: %v\n%s", h.waitErr, h.stderr.String())
	case <-time.After(within):
		return fmt.Errorf("host did not serve within %v:\n%s", within, h.stderr.String())
	}
}

// Stop ends the host with SIGTERM (SIGKILL after 20s) and waits for it.
func (h *hostProc) Stop() {
	select {
	case <-h.done:
		return
	default:
	}
	h.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-h.done:
		if h.waitErr != nil {
			h.t.Errorf("host %s did not stop cleanly on SIGTERM: %v", h.URL, h.waitErr)
		}
	case <-time.After(20 * time.Second):
		h.t.Errorf("host did not stop within 20s of SIGTERM; killing it")
		h.cmd.Process.Kill()
		<-h.done
	}
}

// Kill ends the host with SIGKILL, as a crash, and waits for it.
func (h *hostProc) Kill() {
	h.cmd.Process.Signal(syscall.SIGKILL)
	<-h.done
}

// Signal sends sig to the running host.
func (h *hostProc) Signal(sig os.Signal) {
	if err := h.cmd.Process.Signal(sig); err != nil {
		h.t.Fatalf("signal %v: %v", sig, err)
	}
}

// Stderr is what the host logged so far.
func (h *hostProc) Stderr() string { return h.stderr.String() }

// hostConfig is what the tests put in berth.toml.
type hostConfig struct {
	NotifyURL   string // the fake notification service; its host is allowed
	NotifyToken string // the notifier's notifications-token, if any
	Extra       string // more TOML appended at the end
}

func (c hostConfig) TOML() string {
	var b strings.Builder
	b.WriteString("# written by the end-to-end tests\n")
	if c.NotifyURL != "" {
		hostPort := strings.TrimPrefix(c.NotifyURL, "http://")
		token := ""
		if c.NotifyToken != "" {
			token = fmt.Sprintf(", notifications-token = %q", c.NotifyToken)
		}
		fmt.Fprintf(&b, "[modules.%s]\nallowed-hosts = [%q]\nconfig = { notifications-url = %q%s }\n\n", moduleName, hostPort, c.NotifyURL, token)
	}
	b.WriteString(c.Extra)
	return b.String()
}

// newHost writes cfg to a fresh data directory's berth.toml and starts a host on it.
func newHost(t testing.TB, cfg hostConfig) *hostProc {
	t.Helper()
	data := t.TempDir()
	path := filepath.Join(data, "berth.toml")
	writeFile(t, path, cfg.TOML())
	return startHost(t, data, path)
}

// restart starts another host on the same data directory and config.
func (h *hostProc) restart(t testing.TB) *hostProc {
	t.Helper()
	n := startHost(t, h.Data, h.Config)
	n.token = h.token
	return n
}

func writeFile(t testing.TB, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// response is an HTTP answer, read whole.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r response) String() string { return fmt.Sprintf("%d %s", r.Status, r.Body) }

// JSON decodes the body into v, failing the test when it is not JSON.
func (r response) JSON(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("answer is not JSON (%v): %s", err, r)
	}
}

var client = &http.Client{Timeout: 30 * time.Second}

// request sends a request to the host. body is []byte, string, or any value
// sent as JSON; contentType defaults to application/json when there is a body.
func (h *hostProc) request(method, path string, body any, header ...string) response {
	h.t.Helper()
	r, err := h.try(method, path, body, header...)
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

// try is request for a host that may not answer (killed, or on its way
// down): an error rather than a failed test when the request gets no answer.
// It may be called from any goroutine.
func (h *hostProc) try(method, path string, body any, header ...string) (response, error) {
	var rd io.Reader
	ct := ""
	switch b := body.(type) {
	case nil:
	case []byte:
		rd, ct = bytes.NewReader(b), "application/json"
	case string:
		rd, ct = strings.NewReader(b), "application/json"
	default:
		j, err := json.Marshal(b)
		if err != nil {
			return response{}, err
		}
		rd, ct = bytes.NewReader(j), "application/json"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, h.URL+path, rd)
	if err != nil {
		return response{}, err
	}
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	if h.token != "" {
		req.Header.Set("Authorization", "Bearer "+h.token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i+1] == "" {
			req.Header.Del(header[i])
		} else {
			req.Header.Set(header[i], header[i+1])
		}
	}
	resp, err := client.Do(req)
	if err != nil {
		return response{}, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return response{}, fmt.Errorf("%s %s: read body: %w", method, path, err)
	}
	return response{Status: resp.StatusCode, Header: resp.Header, Body: b}, nil
}

// must sends a request and fails the test unless the answer has status want.
func (h *hostProc) must(want int, method, path string, body any, header ...string) response {
	h.t.Helper()
	r := h.request(method, path, body, header...)
	if r.Status != want {
		h.t.Fatalf("%s %s: want %d, got %s", method, path, want, r)
	}
	return r
}

// moduleInfo is the answer of PUT/GET /v1/modules/{name}.
type moduleInfo struct {
	Name      string `json:"name"`
	SHA256    string `json:"sha256"`
	Processor string `json:"processor"`
	Kind      string `json:"kind"`
	Handlers  []struct {
		Name         string   `json:"name"`
		EventTypes   []string `json:"eventTypes"`
		Subscription string   `json:"subscription"`
	} `json:"handlers"`
	Subscriptions []string `json:"subscriptions"`
}

// upload PUTs the ShipmentNotifier module and checks the answer.
func (h *hostProc) uploadNotifier(t testing.TB, want int) moduleInfo {
	t.Helper()
	r := h.must(want, "PUT", "/v1/modules/"+moduleName, notifierWasm, "Content-Type", "application/wasm")
	var info moduleInfo
	r.JSON(t, &info)
	return info
}

// appendShipped appends an OrderShipped commit to order, owned by buyer, and
// returns its version.
func (h *hostProc) appendShipped(t testing.TB, order, buyer string) uint64 {
	t.Helper()
	r := h.must(201, "POST", "/v1/events", map[string]any{
		"aggregateType": "Order", "aggregateId": order, "ownerId": buyer,
		"events": []map[string]any{{"type": "OrderShipped", "data": map[string]string{"carrier": "DHL"}}},
	})
	var out struct {
		Version  uint64 `json:"version"`
		Position uint64 `json:"position"`
	}
	r.JSON(t, &out)
	return out.Version
}

// appendShippedMany appends an OrderShipped commit to each of n orders
// (named by format from 0 on), owned by buyer, from 8 clients at once.
func (h *hostProc) appendShippedMany(t testing.TB, format string, n int, buyer string) {
	t.Helper()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				h.appendShipped(t, fmt.Sprintf(format, i), buyer)
			}
		})
	}
	wg.Wait()
}

// parkedRecord is a failure ledger record as the API shows it.
type parkedRecord struct {
	Subscription  string `json:"subscription"`
	AggregateType string `json:"aggregateType"`
	AggregateID   string `json:"aggregateId"`
	Version       uint64 `json:"version"`
	Index         uint32 `json:"index"`
	Error         struct {
		Classes []string `json:"classes"`
		Message string   `json:"message"`
		Kind    string   `json:"kind"`
	} `json:"error"`
	Attempts      int    `json:"attempts"`
	State         string `json:"state"`
	InvocationKey string `json:"invocationKey"`
	History       []struct {
		Action string `json:"action"`
		Actor  string `json:"actor"`
		Reason string `json:"reason"`
	} `json:"history"`
}

func (h *hostProc) parked(t testing.TB) []parkedRecord {
	t.Helper()
	var out struct {
		Records []parkedRecord `json:"records"`
	}
	h.must(200, "GET", "/v1/parked", nil).JSON(t, &out)
	return out.Records
}

// waitParked waits until order is parked for the notifier and returns its record.
func (h *hostProc) waitParked(t testing.TB, order string, within time.Duration) parkedRecord {
	t.Helper()
	var rec parkedRecord
	checkfor.Within(t, within, func() error { return h.fetched(t, "/v1/subscriptions/"+subName+"/parked/Order/"+order, &rec) })
	return rec
}

// reads says what an element (what) reads until it holds want; nil then.
func reads(what, text, want string) error {
	if !strings.Contains(text, want) {
		return fmt.Errorf("%s reads %q, want %q in it", what, text, want)
	}
	return nil
}

// fetched reads GET path into v once it answers 200, and says what it
// answered until then.
func (h *hostProc) fetched(t testing.TB, path string, v any) error {
	r := h.request("GET", path, nil)
	if r.Status != 200 {
		return fmt.Errorf("GET %s: %s", path, r)
	}
	r.JSON(t, v)
	return nil
}

// answers says what GET path answers until it answers status; nil then.
func (h *hostProc) answers(path string, status int) error {
	if r := h.request("GET", path, nil); r.Status != status {
		return fmt.Errorf("GET %s: %s, want %d", path, r, status)
	}
	return nil
}

// noneParked says what is parked until nothing is; nil then.
func (h *hostProc) noneParked(t testing.TB) error {
	if recs := h.parked(t); len(recs) != 0 {
		return fmt.Errorf("%d records parked, the first %+v", len(recs), recs[0])
	}
	return nil
}

// parkedWaiting says how many records of st wait for an operator until n
// do; nil then.
func parkedWaiting(st subscriptionStatus, n int) error {
	if got := st.Parked["waiting"]; got != n {
		return fmt.Errorf("%s: %d parked and waiting, want %d (parked by state %v, lag %d)", st.Name, got, n, st.Parked, st.Lag)
	}
	return nil
}

// parkedAre says which aggregates are parked until exactly want are (in
// order); nil then.
func parkedAre(got, want []string) error {
	if !slices.Equal(got, want) {
		return fmt.Errorf("parked %v, want %v", got, want)
	}
	return nil
}

// caughtUp says how far behind st is until it has no lag; nil then.
func caughtUp(st subscriptionStatus) error {
	if st.Lag != 0 {
		return fmt.Errorf("%s %d events behind: checkpoint %d, head %d", st.Name, st.Lag, st.Checkpoint, st.Head)
	}
	return nil
}

// subscriptionStatus is GET /v1/subscriptions/{name}.
type subscriptionStatus struct {
	Name       string         `json:"name"`
	State      string         `json:"state"`
	Checkpoint uint64         `json:"checkpoint"`
	Head       uint64         `json:"head"`
	Lag        uint64         `json:"lag"`
	Unread     string         `json:"unread"` // an outage: head and lag not known
	Parked     map[string]int `json:"parked"`
	Retry      map[string]struct {
		Value  any    `json:"value"`
		Source string `json:"source"`
	} `json:"retry"`
	Partitions []struct {
		Index int    `json:"index"`
		State string `json:"state"`
		Held  int    `json:"held"`
	} `json:"partitions"`
}

// awaitHeld waits until no partition of the subscription is still
// holding its parked aggregates (a started host does so beside its start).
func (h *hostProc) awaitHeld(t testing.TB) {
	t.Helper()
	checkfor.Within(t, 60*time.Second, func() error {
		for _, p := range h.subscription(t).Partitions {
			if p.State == "holding" {
				return fmt.Errorf("partition %d still holding its parked aggregates", p.Index)
			}
		}
		return nil
	})
}

func (h *hostProc) subscription(t testing.TB) subscriptionStatus {
	t.Helper()
	var st subscriptionStatus
	h.must(200, "GET", "/v1/subscriptions/"+subName, nil).JSON(t, &st)
	return st
}

// key is the invocation key of the first event of an Order commit: e.g.
// "ShipmentNotifier.onOrderShipped:Order/o-1@1:0".
func key(order string, version int) string {
	return abi.InvocationKey(subName, "Order", order, uint64(version), 0)
}
