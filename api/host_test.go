package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/assembly"
	"github.com/berthhq/berth/config"
	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/internal/testing/testbuild"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/registry"
	"github.com/berthhq/berth/subscription"
)

// The handler tests run the API over the host's parts as cmd/host opens
// them (assembly): Badger event log and ledger in a temporary
// directory, the sandbox, the subscription engine, the module registry, and
// the ShipmentNotifier sample compiled to wasm, pointed at a notification
// service in httptest.

const notifierSub = "ShipmentNotifier.onOrderShipped"

// notifierWasm is the ShipmentNotifier sample compiled to wasm, built once
// per test binary.
var notifierWasm = sync.OnceValues(func() ([]byte, error) { return testbuild.Bytes("samples/shipment-notifier") })

// notifier returns the ShipmentNotifier sample compiled to wasm.
func notifier(t *testing.T) []byte {
	t.Helper()
	b, err := notifierWasm()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// buyers is the notification service: it knows every buyer but "unknown"
// (404, which the sample parks at once).
type buyers struct {
	mu       sync.Mutex
	notified []string
}

func (b *buyers) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	if strings.Contains(r.URL.Path, "/buyers/unknown/") {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	b.mu.Lock()
	b.notified = append(b.notified, r.URL.Path)
	b.mu.Unlock()
	w.WriteHeader(http.StatusAccepted)
}

// testHost is the API over real parts.
type testHost struct {
	t          *testing.T
	api        *Server
	asm        *assembly.Host
	cfg        hostConfig
	configPath string
	events     eventlog.Log
	ledger     ledger.Store
	engine     *subscription.Engine
	modules    *registry.Registry
	buyers     *buyers
}

// hostConfig is a test host's running configuration: Load is the host's,
// Store applies another as a reload does (assembly.Host.Reconfigure),
// failing the test if the host refuses it.
type hostConfig struct {
	t   *testing.T
	asm *assembly.Host
}

// Load returns the running configuration.
func (c hostConfig) Load() *config.Config { return c.asm.Config() }

// Store makes cfg the running configuration.
func (c hostConfig) Store(cfg *config.Config) {
	c.t.Helper()
	if err := c.asm.Reconfigure(cfg); err != nil {
		c.t.Fatal(err)
	}
}

// Tokens of authTOML, by role.
const (
	readerToken   = "reader-secret"
	operatorToken = "operator-secret"
	deployerToken = "deployer-secret"
	adminToken    = "admin-secret"
)

const authTOML = `
[[auth.tokens]]
name = "ci-reader"
role = "reader"
token = "reader-secret"

[[auth.tokens]]
name = "oncall"
role = "operator"
token = "operator-secret"

[[auth.tokens]]
name = "ci-deployer"
role = "deployer"
token = "deployer-secret"

[[auth.tokens]]
name = "root"
role = "admin"
token = "admin-secret"
`

// newHost starts the API over real parts with the configuration extra
// (TOML) added to the notifier's module settings.
func newHost(t *testing.T, extra string) *testHost {
	t.Helper()
	h := &testHost{t: t, buyers: &buyers{}}
	svc := httptest.NewServer(h.buyers)
	t.Cleanup(svc.Close)
	dir := t.TempDir()
	text := fmt.Sprintf(`
[server]
data-dir = %q

[subscription]
checkpoint-interval = "10ms"

[modules.shipment-notifier]
allowed-hosts = [%q]
config = { notifications-url = %q }
`, dir, strings.TrimPrefix(svc.URL, "http://"), svc.URL) + extra
	h.start(dir, text)
	return h
}

// start opens the host of the configuration text (its file written to
// dir) and the API over it.
func (h *testHost) start(dir, text string) {
	t := h.t
	t.Helper()
	h.configPath = filepath.Join(dir, "berth.toml")
	if err := os.WriteFile(h.configPath, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte(text), "berth.toml")
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	if testing.Verbose() {
		logger = slog.Default()
	}
	metrics := NewMetrics()
	if h.asm, err = assembly.Open(t.Context(), cfg, assembly.Options{Logger: logger, Observer: metrics.Observer()}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		h.asm.Close(ctx)
	})
	h.cfg = hostConfig{t: t, asm: h.asm}
	h.events, h.ledger, h.engine, h.modules = h.asm.Events, h.asm.Ledger, h.asm.Engine, h.asm.Modules
	deps := DepsOf(h.asm)
	deps.Reload, deps.Logger, deps.Metrics = h.reload, logger, metrics
	h.api = New(deps)
}

// reload does what the host does on POST /v1/config/reload: read the file
// again, refusing a bad one.
func (h *testHost) reload() error {
	next, err := config.Load(h.configPath)
	if err != nil {
		return err
	}
	return h.asm.Reconfigure(next)
}

// response is an answer of the API.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) String() string { return fmt.Sprintf("%d %s", r.status, r.body) }

// json decodes the body into v, failing the test when it does not decode.
func (r response) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
}

// req is a request to the API.
type req struct {
	method, path string
	body         string
	contentType  string // default application/json when there is a body
	token        string
	chunked      bool // send the body without a Content-Length
}

// do sends r to the API and checks the answer against openapi.json.
func (h *testHost) do(r req) response {
	h.t.Helper()
	resp := serve(h.api, r)
	checkResponse(h.t, h.api, r.method, r.path, resp)
	return resp
}

func serve(s *Server, r req) response { return serveWith(s, r, nil) }

// serveWith is serve with a last change to the request.
func serveWith(s *Server, r req, change func(*http.Request)) response {
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
	}
	hr := newRequest(r.method, r.path, body)
	if r.chunked {
		hr.ContentLength = -1
		hr.Body = io.NopCloser(strings.NewReader(r.body))
	}
	ct := r.contentType
	if ct == "" && r.body != "" {
		ct = "application/json"
	}
	if ct != "" {
		hr.Header.Set("Content-Type", ct)
	}
	if r.token != "" {
		hr.Header.Set("Authorization", "Bearer "+r.token)
	}
	if change != nil {
		change(hr)
	}
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, hr)
	return response{status: w.Code, header: w.Header(), body: w.Body.Bytes()}
}

// testHostName is the Host of the tests' requests: an address the API
// serves (the default server.listen), not httptest's example.com, which
// the Host check refuses.
const testHostName = "127.0.0.1:8080"

// newRequest is httptest.NewRequest for the API: a request served in-process
// with the Host of a local client.
func newRequest(method, target string, body io.Reader) *http.Request {
	hr := httptest.NewRequest(method, target, body)
	hr.Host = testHostName
	return hr
}

// upload puts the notifier sample under name.
func (h *testHost) upload(name, token string) response {
	h.t.Helper()
	hr := newRequest(http.MethodPut, "/v1/modules/"+name, bytes.NewReader(notifier(h.t)))
	hr.Header.Set("Content-Type", "application/wasm")
	if token != "" {
		hr.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	h.api.Handler().ServeHTTP(w, hr)
	resp := response{status: w.Code, header: w.Header(), body: w.Body.Bytes()}
	checkResponse(h.t, h.api, http.MethodPut, "/v1/modules/"+name, resp)
	return resp
}

// parkedWithAuth starts a host with the tokens of authTOML, deploys the
// notifier as the deployer and parks order (its buyer unknown).
func parkedWithAuth(t *testing.T, order string) *testHost {
	t.Helper()
	h := newHost(t, authTOML)
	if r := h.upload("shipment-notifier", deployerToken); r.status != http.StatusCreated {
		t.Fatalf("upload as deployer: %s", r)
	}
	if r := h.ship(order, "unknown"); r.status != http.StatusCreated {
		t.Fatalf("append as deployer: %s", r)
	}
	h.waitParked(order)
	return h
}

// ship appends an OrderShipped event of order for buyer.
func (h *testHost) ship(order, buyer string) response {
	h.t.Helper()
	return h.do(req{method: "POST", path: "/v1/events", token: deployerToken, body: fmt.Sprintf(
		`{"aggregateType":"Order","aggregateId":%q,"ownerId":%q,"events":[{"type":"OrderShipped","data":{"carrier":"DHL"}}]}`, order, buyer)})
}

// waitParked waits until order is parked by the notifier.
func (h *testHost) waitParked(order string) {
	h.t.Helper()
	checkfor.Nil(h.t, 20*time.Second, 10*time.Millisecond, func() error {
		if _, err := h.engine.Parked(context.Background(), notifierSub, "Order", order); err != nil {
			return fmt.Errorf("order %s was not parked: %w", order, err)
		}
		return nil
	})
}

// problemOf checks that r is a problem document of status and returns it.
func problemOf(t *testing.T, r response, status int) Problem {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %s, want %d", r, status)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type %q, want application/problem+json", ct)
	}
	var p Problem
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("problem %q: %v", r.body, err)
	}
	if p.Status != status || p.Title != http.StatusText(status) || !strings.HasPrefix(p.Type, "https://berth.dev/problems/") || p.Detail == "" {
		t.Errorf("problem %+v: want status %d, its title, a berth.dev type and a detail", p, status)
	}
	return p
}
