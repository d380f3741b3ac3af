package registry_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/assembly"
	"github.com/berthhq/berth/config"
	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/internal/clock"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/internal/testing/syncbuf"
	"github.com/berthhq/berth/internal/testing/testbuild"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/registry"
	"github.com/berthhq/berth/retry"
	"github.com/berthhq/berth/subscription"
)

// gatewayCall is one command a fake gateway received.
type gatewayCall struct {
	Path          string
	Key           string // the Idempotency-Key header
	RequestID     string `json:"requestId"`
	AggregateType string `json:"aggregateType"`
	AggregateID   string `json:"aggregateId"`
	Type          string `json:"type"`
	Payload       json.RawMessage
}

// fakeGateway is a user's command service: answer decides each reply from
// the command and how many times its request id was seen before.
type fakeGateway struct {
	srv    *httptest.Server
	answer func(c gatewayCall, seen int) (status int, header []string, body string)

	mu    sync.Mutex
	calls []gatewayCall
}

func newFakeGateway(t *testing.T, answer func(c gatewayCall, seen int) (int, []string, string)) *fakeGateway {
	g := &fakeGateway{answer: answer}
	g.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var c gatewayCall
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &c); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		c.Path, c.Key = r.URL.Path, r.Header.Get("Idempotency-Key")
		g.mu.Lock()
		seen := 0
		for _, p := range g.calls {
			if p.RequestID == c.RequestID {
				seen++
			}
		}
		g.calls = append(g.calls, c)
		g.mu.Unlock()
		status, header, body := 200, []string(nil), ""
		if g.answer != nil {
			status, header, body = g.answer(c, seen)
		}
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(g.srv.Close)
	return g
}

// callsOf returns the calls of the command type ("" for all).
func (g *fakeGateway) callsOf(typ string) []gatewayCall {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []gatewayCall
	for _, c := range g.calls {
		if typ == "" || c.Type == typ {
			out = append(out, c)
		}
	}
	return out
}

// sagaHost is a host (assembly) over a temporary directory with the
// compiled order-saga deployed.
type sagaHost struct {
	events eventlog.Log
	engine *subscription.Engine
	log    *syncbuf.Buffer
}

const sagaSub = "OrderSaga.onOrderPlaced"

// sagaFastRetry keeps the sample's three attempts but makes the waits short.
const sagaFastRetry = `
[subscriptions."OrderSaga.onOrderPlaced".retry]
initial-backoff = "1ms"
max-backoff = "2ms"
`

func newSagaHost(t *testing.T, wasm []byte, cacheDir, toml string, clock clock.Clock) *sagaHost {
	t.Helper()
	ctx := context.Background()
	h := &sagaHost{log: &syncbuf.Buffer{}}
	cfg, err := config.Parse([]byte(toml), "berth.toml")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Server.DataDir = t.TempDir()
	cfg.Subscription.Partitions = 2
	cfg.Subscription.CheckpointInterval = retry.Duration(10 * time.Millisecond)
	logger := slog.New(slog.NewTextHandler(h.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	asm, err := assembly.Open(ctx, cfg, assembly.Options{Logger: logger, Clock: clock, Jitter: func() float64 { return 0 },
		WasmCacheDir: cacheDir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		asm.Close(ctx)
		if t.Failed() {
			t.Logf("host log:\n%s", h.log.String())
		}
	})
	h.events, h.engine = asm.Events, asm.Engine
	info, _, err := asm.Modules.Put(ctx, "order-saga", wasm)
	if err != nil {
		t.Fatal(err)
	}
	if info.Kind != "saga" || len(info.Subscriptions) != 1 || info.Subscriptions[0] != sagaSub {
		t.Fatalf("deployed %+v; want a saga with the one subscription %s", info, sagaSub)
	}
	return h
}

// place appends an OrderPlaced event to order with the payload.
func (h *sagaHost) place(t *testing.T, order string, payload string) {
	t.Helper()
	_, err := h.events.Append(context.Background(), eventlog.AppendRequest{AggregateType: "Order", AggregateID: order,
		ExpectedVersion: eventlog.AnyVersion, Events: []eventlog.Event{{Type: "OrderPlaced", Payload: []byte(payload)}}})
	if err != nil {
		t.Fatal(err)
	}
}

// parked returns the ledger record of order, nil if it is not parked.
func (h *sagaHost) parked(t *testing.T, order string) *ledger.Record {
	t.Helper()
	rec, err := h.engine.Parked(context.Background(), sagaSub, "Order", order)
	if errors.Is(err, subscription.ErrNotParked) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// awaitBackoff waits for the gateway's first ReserveStock request and then
// for the engine to wait on clock before its next attempt.
func awaitBackoff(t *testing.T, g *fakeGateway, clock *clock.Fake) {
	t.Helper()
	sagaEventually(t, func() error { return called(g, "ReserveStock", 1) })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := clock.BlockUntil(ctx, 1); err != nil {
		t.Fatal("the engine does not wait:", err)
	}
}

// sagaEventually polls cond every 5ms until it holds or 20s have passed.
func sagaEventually(t *testing.T, check func() error) {
	t.Helper()
	checkfor.Nil(t, 20*time.Second, 5*time.Millisecond, check)
}

// called says how many calls of type typ g had until it has n; nil then.
func called(g *fakeGateway, typ string, n int) error {
	if got := g.callsOf(typ); len(got) != n {
		return fmt.Errorf("%d %s calls, want %d; all calls: %+v", len(got), typ, n, g.callsOf(""))
	}
	return nil
}

// parkedNow says what the gateway saw until order is parked; nil then.
func parkedNow(t *testing.T, h *sagaHost, g *fakeGateway, order string) error {
	if h.parked(t, order) == nil {
		return fmt.Errorf("%s not parked; gateway calls: %+v", order, g.callsOf(""))
	}
	return nil
}

// TestSagaOverRealParts runs the compiled order-saga in the real sandbox,
// under the real engine over Badger stores, against an httptest command
// gateway: what each answer of the gateway does to the attempt.
func TestSagaOverRealParts(t *testing.T) {
	build := t.TempDir()
	path, err := testbuild.Wasm(build, "samples/order-saga")
	if err != nil {
		t.Fatal(err)
	}
	wasm, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(build, "wasm-cache") // compiled once, shared by the subtests
	gateways := func(g *fakeGateway) string {
		return "[commands.Stock]\nurl = \"" + g.srv.URL + "/stock\"\n\n[commands.Order]\nurl = \"" + g.srv.URL + "/order\"\n"
	}
	const order = `{"item":"sku-9","quantity":2}`
	key := func(order string) string { return sagaSub + ":Order/" + order + "@1:0" }

	t.Run("accepted", func(t *testing.T) {
		g := newFakeGateway(t, nil)
		h := newSagaHost(t, wasm, cache, gateways(g)+sagaFastRetry, nil)
		h.place(t, "o-1", order)
		sagaEventually(t, func() error { return called(g, "ReserveStock", 1) })
		c := g.callsOf("ReserveStock")[0]
		if c.Path != "/stock" || c.RequestID != key("o-1")+"/0" || c.Key != c.RequestID || c.AggregateType != "Stock" ||
			c.AggregateID != "sku-9" || !registry.SameJSON(json.RawMessage(c.Payload), map[string]any{"order": "o-1", "quantity": 2}) {
			t.Errorf("reservation %+v", c)
		}
		if len(g.callsOf("CancelOrder")) != 0 || h.parked(t, "o-1") != nil {
			t.Error("an accepted reservation was compensated or parked")
		}
	})

	t.Run("rejected: the compensation is sent", func(t *testing.T) {
		g := newFakeGateway(t, func(c gatewayCall, _ int) (int, []string, string) {
			if c.Type == "ReserveStock" && c.AggregateID == "sku-0" {
				return 409, []string{"Content-Type", "application/problem+json"}, `{"title":"Conflict","detail":"out of stock"}`
			}
			return 202, nil, ""
		})
		h := newSagaHost(t, wasm, cache, gateways(g)+sagaFastRetry, nil)
		h.place(t, "o-1", `{"item":"sku-0","quantity":1}`)
		h.place(t, "o-2", order)
		sagaEventually(t, func() error { return called(g, "CancelOrder", 1) })
		sagaEventually(t, func() error { return called(g, "ReserveStock", 2) })
		c := g.callsOf("CancelOrder")[0]
		if c.Path != "/order" || c.AggregateID != "o-1" || c.RequestID != key("o-1")+":rejected:0/0" || c.Key != c.RequestID ||
			!registry.SameJSON(json.RawMessage(c.Payload), map[string]any{"reason": "stock not reserved: out of stock"}) {
			t.Errorf("compensation %+v", c)
		}
		if len(g.callsOf("ReserveStock")) != 2 || h.parked(t, "o-1") != nil {
			t.Errorf("reservations %+v; a rejection is not a failure", g.callsOf("ReserveStock"))
		}
	})

	t.Run("5xx: retried with the same request id, then accepted", func(t *testing.T) {
		g := newFakeGateway(t, func(c gatewayCall, seen int) (int, []string, string) {
			if seen == 0 {
				return 503, nil, "try again"
			}
			return 200, nil, ""
		})
		h := newSagaHost(t, wasm, cache, gateways(g)+sagaFastRetry, nil)
		h.place(t, "o-1", order)
		sagaEventually(t, func() error { return called(g, "ReserveStock", 2) })
		calls := g.callsOf("ReserveStock")
		for _, c := range calls {
			if c.RequestID != key("o-1")+"/0" || c.Key != c.RequestID {
				t.Errorf("request %+v, want request id and key %s/0", c, key("o-1"))
			}
		}
		if h.parked(t, "o-1") != nil {
			t.Error("parked after a success")
		}
	})

	t.Run("a gateway slower than the attempt's timeout: berth.Timeout", func(t *testing.T) {
		// The gateway answers only once the test is over: slower than any
		// attempt's deadline, however long the machine takes to reach it.
		release := make(chan struct{})
		g := newFakeGateway(t, func(c gatewayCall, seen int) (int, []string, string) {
			<-release
			return 200, nil, ""
		})
		h := newSagaHost(t, wasm, cache, gateways(g)+`
[subscriptions."OrderSaga.onOrderPlaced".retry]
max-attempts = 2
initial-backoff = "1ms"
max-backoff = "2ms"
timeout = "200ms"
`, nil)
		t.Cleanup(func() { close(release) }) // first: before the host and the gateway close
		h.place(t, "o-1", order)
		sagaEventually(t, func() error { return parkedNow(t, h, g, "o-1") })
		rec := h.parked(t, "o-1")
		if rec.Attempts != 2 || !slices.Equal(rec.Error.Classes, []string{retry.ClassTimeout}) || rec.Error.Kind != "timeout" {
			t.Errorf("parked %+v, want berth.Timeout after 2 attempts", rec)
		}
	})

	t.Run("a failed handler sends nothing", func(t *testing.T) {
		g := newFakeGateway(t, nil)
		h := newSagaHost(t, wasm, cache, gateways(g)+sagaFastRetry, nil)
		h.place(t, "o-1", `{"quantity":2}`) // no item: InvalidOrder, unrecoverable
		h.place(t, "o-2", order)
		sagaEventually(t, func() error { return parkedNow(t, h, g, "o-1") })
		sagaEventually(t, func() error { return called(g, "ReserveStock", 1) })
		rec := h.parked(t, "o-1")
		if rec.Attempts != 1 || len(rec.Error.Classes) == 0 || rec.Error.Classes[0] != "InvalidOrder" {
			t.Errorf("parked %+v, want InvalidOrder after one attempt", rec)
		}
		for _, c := range g.callsOf("") {
			if c.AggregateID != "sku-9" {
				t.Errorf("the failed handler's command was sent: %+v", c)
			}
		}
	})

	t.Run("a failed rejection handler is retried, then parked", func(t *testing.T) {
		g := newFakeGateway(t, func(c gatewayCall, _ int) (int, []string, string) {
			if c.Type == "ReserveStock" {
				return 422, []string{"Content-Type", "text/plain"}, "quantity must be a string"
			}
			return 200, nil, ""
		})
		h := newSagaHost(t, wasm, cache, gateways(g)+sagaFastRetry, nil)
		h.place(t, "o-1", order)
		sagaEventually(t, func() error { return parkedNow(t, h, g, "o-1") })
		rec := h.parked(t, "o-1")
		if rec.Attempts != 3 || len(rec.Error.Classes) == 0 || rec.Error.Classes[0] != "InvalidReservation" ||
			!strings.Contains(rec.Error.Message, "quantity must be a string") || !strings.Contains(rec.Error.Message, "onReservationRejected") {
			t.Errorf("parked %+v, want InvalidReservation from the rejection handler after 3 attempts", rec)
		}
		calls := g.callsOf("")
		if len(calls) != 3 {
			t.Errorf("gateway calls %+v, want the reservation three times", calls)
		}
		for _, c := range calls {
			if c.Type != "ReserveStock" || c.RequestID != key("o-1")+"/0" {
				t.Errorf("call %+v", c)
			}
		}
	})

	t.Run("no gateway for the aggregate type", func(t *testing.T) {
		g := newFakeGateway(t, nil)
		h := newSagaHost(t, wasm, cache, "[commands.Order]\nurl = \""+g.srv.URL+"/order\"\n"+sagaFastRetry, nil)
		h.place(t, "o-1", order)
		sagaEventually(t, func() error { return parkedNow(t, h, g, "o-1") })
		rec := h.parked(t, "o-1")
		if len(rec.Error.Classes) == 0 || rec.Error.Classes[0] != retry.ClassNoCommandGateway || !strings.Contains(rec.Error.Message, "[commands.Stock]") {
			t.Errorf("parked %+v, want %s naming [commands.Stock]", rec, retry.ClassNoCommandGateway)
		}
		if calls := g.callsOf(""); len(calls) != 0 {
			t.Errorf("sent %+v", calls)
		}
	})

	t.Run("429: backpressure, not retried before Retry-After", func(t *testing.T) {
		g := newFakeGateway(t, func(c gatewayCall, seen int) (int, []string, string) {
			if seen == 0 {
				return 429, []string{"Retry-After", "30"}, ""
			}
			return 200, nil, ""
		})
		clock := clock.NewFake(time.Now())
		h := newSagaHost(t, wasm, cache, gateways(g), clock)
		h.place(t, "o-1", order)
		awaitBackoff(t, g, clock)
		wait, _ := clock.NextFire()
		if wait < 30*time.Second {
			t.Errorf("the engine waits %v, want at least the Retry-After of 30s", wait)
		}
		clock.Advance(wait - time.Second)
		if n := len(g.callsOf("ReserveStock")); n != 1 || h.parked(t, "o-1") != nil {
			t.Errorf("before Retry-After: %d requests, parked %v", n, h.parked(t, "o-1"))
		}
		clock.Advance(time.Second)
		sagaEventually(t, func() error { return called(g, "ReserveStock", 2) })
		calls := g.callsOf("ReserveStock")
		if calls[1].RequestID != calls[0].RequestID || h.parked(t, "o-1") != nil {
			t.Errorf("retry %+v after %+v, parked %v", calls[1], calls[0], h.parked(t, "o-1"))
		}
	})

	// A Retry-After too large for a Duration neither overflows nor holds the
	// aggregate for good: the engine waits retry.MaxRetryAfter, then retries.
	t.Run("429: a huge Retry-After is capped", func(t *testing.T) {
		g := newFakeGateway(t, func(c gatewayCall, seen int) (int, []string, string) {
			if seen == 0 {
				return 429, []string{"Retry-After", "99999999999999999999"}, ""
			}
			return 200, nil, ""
		})
		clock := clock.NewFake(time.Now())
		h := newSagaHost(t, wasm, cache, gateways(g), clock)
		h.place(t, "o-1", order)
		awaitBackoff(t, g, clock)
		if wait, _ := clock.NextFire(); wait != retry.MaxRetryAfter {
			t.Errorf("the engine waits %v, want retry.MaxRetryAfter (%v)", wait, retry.MaxRetryAfter)
		}
		clock.Advance(retry.MaxRetryAfter)
		sagaEventually(t, func() error { return called(g, "ReserveStock", 2) })
		if h.parked(t, "o-1") != nil {
			t.Errorf("parked %v", h.parked(t, "o-1"))
		}
	})
}
