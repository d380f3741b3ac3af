package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/berthhq/berth/internal/natstest"
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
	h := newHost(t, hostConfig{Extra: fmt.Sprintf(`
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
}
