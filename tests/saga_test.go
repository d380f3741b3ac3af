package tests

import (
	"encoding/json"
	"fmt"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/testbuild"
)

// commandService is a fake of the user's command service behind the
// [commands.*] gateways: it records every command and rejects ReserveStock
// of the items in outOfStock with a 409 problem.
type commandService struct {
	srv        *httptest.Server
	outOfStock map[string]bool

	mu       sync.Mutex
	commands []receivedCommand
}

// receivedCommand is one command the service received.
type receivedCommand struct {
	Path          string
	Key           string // the Idempotency-Key header
	Auth          string // the Authorization header
	RequestID     string `json:"requestId"`
	AggregateType string `json:"aggregateType"`
	AggregateID   string `json:"aggregateId"`
	Type          string `json:"type"`
	Payload       json.RawMessage
	Status        int
}

func newCommandService(t testing.TB, outOfStock ...string) *commandService {
	s := &commandService{outOfStock: map[string]bool{}}
	for _, item := range outOfStock {
		s.outOfStock[item] = true
	}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var c receivedCommand
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &c); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c.Path, c.Key, c.Auth, c.Status = r.URL.Path, r.Header.Get("Idempotency-Key"), r.Header.Get("Authorization"), http.StatusAccepted
		if c.Type == "ReserveStock" && s.outOfStock[c.AggregateID] {
			c.Status = http.StatusConflict
		}
		s.mu.Lock()
		s.commands = append(s.commands, c)
		s.mu.Unlock()
		if c.Status == http.StatusConflict {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(c.Status)
			fmt.Fprintf(w, `{"title":"Conflict","status":409,"detail":"%s is out of stock"}`, c.AggregateID)
			return
		}
		w.WriteHeader(c.Status)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// of returns the commands of the type received so far.
// got says which commands s received until it received n of type typ;
// nil then.
func (s *commandService) got(typ string, n int) error {
	if cmds := s.of(typ); len(cmds) != n {
		s.mu.Lock()
		defer s.mu.Unlock()
		return fmt.Errorf("%d %s commands, want %d; all received: %+v", len(cmds), typ, n, s.commands)
	}
	return nil
}

func (s *commandService) of(typ string) []receivedCommand {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []receivedCommand
	for _, c := range s.commands {
		if c.Type == typ {
			out = append(out, c)
		}
	}
	return out
}

// TestSagaCompensates runs the order-saga sample on the built host: each
// placed order's stock is reserved through [commands.Stock]; the service
// rejects one reservation, and the saga's OnRejected handler cancels that
// order through [commands.Order]. A rejection is not a failure: nothing is
// parked.
func TestSagaCompensates(t *testing.T) {
	path, err := testbuild.Wasm(t.TempDir(), "samples/order-saga")
	if err != nil {
		t.Fatal(err)
	}
	wasm, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	svc := newCommandService(t, "sku-0")
	h := newHost(t, hostConfig{Extra: fmt.Sprintf(`
[commands.Stock]
url = "%s/stock"
timeout = "5s"

[commands.Order]
url = "%s/orders"
headers = { Authorization = "Bearer order-service-token" }
`, svc.srv.URL, svc.srv.URL)})

	var info moduleInfo
	h.must(201, "PUT", "/v1/modules/order-saga", wasm, "Content-Type", "application/wasm").JSON(t, &info)
	if info.Processor != "OrderSaga" || info.Kind != "saga" || len(info.Subscriptions) != 1 || info.Subscriptions[0] != "OrderSaga.onOrderPlaced" {
		t.Fatalf("upload: %+v; want the saga with one subscription (the rejection handler gets none)", info)
	}

	orders := map[string]string{"o-1": "sku-1", "o-2": "sku-0", "o-3": "sku-3"}
	for _, order := range []string{"o-1", "o-2", "o-3"} {
		h.must(201, "POST", "/v1/events", map[string]any{
			"aggregateType": "Order", "aggregateId": order,
			"events": []map[string]any{{"type": "OrderPlaced", "data": map[string]any{"item": orders[order], "quantity": 1}}},
		})
	}

	checkfor.Within(t, 30*time.Second, func() error { return svc.got("CancelOrder", 1) })
	checkfor.Within(t, 30*time.Second, func() error { return svc.got("ReserveStock", 3) })

	key := func(order string) string { return "OrderSaga.onOrderPlaced:Order/" + order + "@1:0" }
	for _, c := range svc.of("ReserveStock") {
		want := map[string]string{"sku-1": "o-1", "sku-0": "o-2", "sku-3": "o-3"}[c.AggregateID]
		if c.Path != "/stock" || c.AggregateType != "Stock" || c.RequestID != key(want)+"/0" || c.Key != c.RequestID {
			t.Errorf("reservation %+v, want request id %s/0 at /stock", c, key(want))
		}
	}
	cancel := svc.of("CancelOrder")[0]
	var payload struct {
		Reason string `json:"reason"`
	}
	json.Unmarshal(cancel.Payload, &payload)
	if cancel.Path != "/orders" || cancel.AggregateType != "Order" || cancel.AggregateID != "o-2" ||
		cancel.RequestID != key("o-2")+":rejected:0/0" || cancel.Key != cancel.RequestID ||
		cancel.Auth != "Bearer order-service-token" || payload.Reason != "stock not reserved: sku-0 is out of stock" {
		t.Errorf("compensation %+v (reason %q)", cancel, payload.Reason)
	}
	if parked := h.parked(t); len(parked) != 0 {
		t.Errorf("parked %+v; a rejected command is not a failure", parked)
	}
}
