package tests

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/checkfor"
)

// TestProjectionKilledMidStream kills the host with SIGKILL twice while the
// order-summary projection works through a backlog (with store.sync
// "always", the default), each kill in a wave of the backlog of its own,
// and restarts it on the same data directory each time: at the end every
// buyer's summary is the fold of the log's events, so no event's writes
// were lost or applied twice. The backlog's first attempts skip the
// applied-mark lookup (subscription.Delivery.Fresh); after each kill the
// events redelivered from the durable checkpoint look it up, and those
// applied before the kill are passed over.
func TestProjectionKilledMidStream(t *testing.T) {
	wasm, err := orderSummaryWasm()
	if err != nil {
		t.Fatal(err)
	}
	h := newHost(t, hostConfig{})
	h.must(201, "PUT", "/v1/modules/order-summary", wasm, "Content-Type", "application/wasm")

	const orders, buyers, waves = 1500, 7, 3
	want := map[string]buyerSummary{}
	// appendWave appends wave w's orders (of waves) in batches of 500.
	appendWave := func(h *hostProc, w int) {
		var batch []map[string]any
		flush := func() {
			var out struct {
				Failed int `json:"failed"`
			}
			h.must(200, "POST", "/v1/events/batch", map[string]any{"appends": batch}).JSON(t, &out)
			if out.Failed != 0 {
				t.Fatalf("%d appends of the batch failed", out.Failed)
			}
			batch = batch[:0]
		}
		for i := w * orders / waves; i < (w+1)*orders/waves; i++ {
			buyer := fmt.Sprint("b-", i%buyers)
			events := []map[string]any{{"type": "OrderPlaced", "data": map[string]int{"total": i + 1}}}
			s := want[buyer]
			s.Orders++
			s.Total += int64(i + 1)
			if i%3 == 0 {
				events = append(events, map[string]any{"type": "OrderShipped", "data": map[string]int{}})
				s.Shipped++
			}
			want[buyer] = s
			batch = append(batch, map[string]any{"aggregateType": "Order", "aggregateId": fmt.Sprint("o-", i),
				"ownerId": buyer, "expectedVersion": 0, "events": events})
			if len(batch) == 500 {
				flush()
			}
		}
		if len(batch) > 0 {
			flush()
		}
	}

	status := func(h *hostProc) subscriptionStatus {
		var st subscriptionStatus
		r := h.request("GET", "/v1/subscriptions/"+summarySub, nil)
		if r.Status != 200 || json.Unmarshal(r.Body, &st) != nil {
			t.Fatalf("status: %s", r)
		}
		return st
	}
	// Each kill comes with a wave of its own, so that a projection faster
	// than this test (it may finish a wave before the first status read)
	// still has a backlog to be killed in the middle of, and a kill after
	// it caught up leaves the next wave to do.
	for kill := range waves - 1 {
		from := status(h).Checkpoint
		appendWave(h, kill)
		// Kill once the projection has gone some way past where it
		// started, or has caught up.
		checkfor.Within(t, 30*time.Second, func() error {
			if st := status(h); st.Checkpoint < from+200 && st.Lag > 0 {
				return fmt.Errorf("checkpoint %d, lag %d, want past %d", st.Checkpoint, st.Lag, from+200)
			}
			return nil
		})
		st := status(h)
		h.Kill()
		if st.Lag == 0 {
			t.Logf("kill %d: the projection had caught up before the kill", kill+1)
		}
		t.Logf("kill %d at checkpoint %d of head %d", kill+1, st.Checkpoint, st.Head)
		h = h.restart(t)
	}
	appendWave(h, waves-1)
	h.waitSummaries(t, want)
}
