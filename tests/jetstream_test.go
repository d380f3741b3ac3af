package tests

import (
	"fmt"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/natstest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The built host with store.backend = "jetstream" against a real NATS
// server (in the test's process): events appended over REST go to the
// stream, the order-summary projection handles them, and after a restart
// the host finds them there and goes on.
func TestJetStreamBackend(t *testing.T) {
	wasm, err := orderSummaryWasm()
	if err != nil {
		t.Fatal(err)
	}
	srv := natstest.RunServer(t)
	// A write NATS does not answer is asked again for write-timeout less
	// a tenth, then answered 503: 10s keeps the outage below short.
	h := newHost(t, hostConfig{Extra: fmt.Sprintf(`
[server]
write-timeout = "10s"

[store]
backend = "jetstream"

[store.jetstream]
urls = [%q]
stream = "E2E_EVENTS"
subject-prefix = "e2e.events"
`, srv.URL())})
	h.must(201, "PUT", "/v1/modules/order-summary", wasm, "Content-Type", "application/wasm")
	for i := range 4 {
		buyer := []string{"ann", "bob"}[i%2]
		order := fmt.Sprintf("o/%d", i) // a slash, which a subject token cannot hold as it is
		h.appendOrder(t, order, buyer, "OrderPlaced", 100*(i+1))
		if i < 2 {
			h.appendOrder(t, order, buyer, "OrderShipped", 0)
		}
	}
	want := map[string]buyerSummary{"ann": {2, 1, 400}, "bob": {2, 1, 600}}
	h.waitSummaries(t, want)

	// The commits are in the stream, one message each, and not in the data directory.
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(t.Context(), "E2E_EVENTS")
	if err != nil {
		t.Fatalf("the host made no stream: %v", err)
	}
	if n := s.CachedInfo().State.Msgs; n != 6 {
		t.Fatalf("the stream holds %d messages, want 6", n)
	}
	if _, err := os.Stat(filepath.Join(h.Data, "events")); !os.IsNotExist(err) {
		t.Fatalf("the host made a Badger event log too: %v", err)
	}

	// A restart finds every commit in the stream, and delivery goes on.
	h.Stop()
	h = h.restart(t)
	var read struct {
		Commits []struct {
			Version uint64 `json:"version"`
		} `json:"commits"`
	}
	h.must(200, "GET", "/v1/aggregates/Order/o%2F0/events", nil).JSON(t, &read)
	if len(read.Commits) != 2 || read.Commits[1].Version != 2 {
		t.Fatalf("o/0 after the restart: %+v", read)
	}
	h.appendOrder(t, "o/4", "ann", "OrderPlaced", 1000)
	want["ann"] = buyerSummary{3, 1, 1400}
	h.waitSummaries(t, want)

	// NATS away: the subscriptions still answer, within seconds, and say
	// what could not be read, rather than vanish from the list or fail; an
	// append is refused as unavailable. Once NATS is back, delivery goes on.
	srv.Shutdown()
	var list struct {
		Subscriptions []struct {
			Name   string `json:"name"`
			State  string `json:"state"`
			Unread string `json:"unread"`
		} `json:"subscriptions"`
	}
	asked := time.Now()
	h.must(200, "GET", "/v1/subscriptions", nil).JSON(t, &list)
	if len(list.Subscriptions) != 1 || !strings.Contains(list.Subscriptions[0].Unread, "event log") || time.Since(asked) > 5*time.Second {
		t.Fatalf("subscriptions during the outage (after %v): %+v, want the projection with what could not be read", time.Since(asked), list)
	}
	name := list.Subscriptions[0].Name
	var one struct {
		State  string `json:"state"`
		Unread string `json:"unread"`
	}
	h.must(200, "GET", "/v1/subscriptions/"+name, nil).JSON(t, &one)
	if one.Unread == "" || one.State == "" {
		t.Fatalf("%s during the outage: %+v", name, one)
	}
	t.Logf("%s during the outage: %s: %s", name, one.State, one.Unread)
	if r := h.request("POST", "/v1/events", map[string]any{"aggregateType": "Order", "aggregateId": "o/5", "ownerId": "bob",
		"events": []map[string]any{{"type": "OrderPlaced", "data": map[string]int{"total": 1}}}}); r.Status != 503 ||
		r.Header.Get("Retry-After") == "" {
		t.Fatalf("an append during the outage: %s, want 503 with Retry-After", r)
	}
	srv.Restart()
	checkfor.Within(t, 30*time.Second, func() error {
		r := h.request("POST", "/v1/events", map[string]any{"aggregateType": "Order", "aggregateId": "o/6", "ownerId": "bob",
			"events": []map[string]any{{"type": "OrderPlaced", "data": map[string]int{"total": 2000}}}})
		if r.Status != 201 {
			return fmt.Errorf("an append once NATS is back: %s", r)
		}
		return nil
	})
	want["bob"] = buyerSummary{3, 1, 2600}
	h.waitSummaries(t, want)
	checkfor.Within(t, 30*time.Second, func() error {
		one.Unread = "" // absent when read
		h.must(200, "GET", "/v1/subscriptions/"+name, nil).JSON(t, &one)
		if one.Unread != "" {
			return fmt.Errorf("%s not read again with NATS back: %s", name, one.Unread)
		}
		return nil
	})
}
