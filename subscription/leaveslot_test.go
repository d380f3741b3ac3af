package subscription

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/retry"
)

// An attempt that waits for a store off its slot (LeaveSlot) lets another
// aggregate take the slot, at most Concurrency such attempts a partition;
// its aggregate's next event still waits for it, and the checkpoint does
// not pass it until its Invoke has returned.
func TestLeaveSlotLendsTheSlotWhileTheCallWaits(t *testing.T) {
	var mu sync.Mutex
	left := map[string]bool{} // the calls in flight, by aggregate: whether each left its slot
	handled := map[string][]uint64{}
	release := make(chan struct{})
	inv := InvokerFunc(func(ctx context.Context, d Delivery) *retry.Failure {
		id := d.Commit.AggregateID
		l := LeaveSlot(ctx) // the handler ran; now "the store"
		mu.Lock()
		if _, busy := left[id]; busy {
			t.Errorf("two events of %s at once", id)
		}
		left[id] = l
		mu.Unlock()
		block(ctx, release)
		mu.Lock()
		delete(left, id)
		handled[id] = append(handled[id], d.Commit.Version)
		mu.Unlock()
		return nil
	})
	e := newEnv(t, Options{Partitions: 1, Concurrency: 2}, spec(sub, inv))
	unblock := unblockAtEnd(t, release)
	e.start()
	ids := []string{"a", "b", "c", "d", "e"}
	for range 2 {
		for _, id := range ids {
			e.append("Order", id)
		}
	}
	// Two calls wait off their slots, two more hold the slots: the third
	// and fourth LeaveSlot found the partition's bound reached.
	checkfor.Eventually(t, func() error {
		mu.Lock()
		defer mu.Unlock()
		off := 0
		for _, l := range left {
			if l {
				off++
			}
		}
		if len(left) != 4 || off != 2 {
			return fmt.Errorf("%d calls in flight, %d of them off their slots; want 4 and 2", len(left), off)
		}
		return nil
	})
	if st := e.status(sub); st.Checkpoint != 1 || st.Partitions[0].Active != 2 {
		t.Fatalf("checkpoint %d with %d slots taken; want 1 (nothing returned yet) and 2", st.Checkpoint, st.Partitions[0].Active)
	}
	unblock()
	checkfor.Eventually(t, func() error { return e.checkpointAt(sub, 11) })
	mu.Lock()
	defer mu.Unlock()
	for _, id := range ids {
		if !slices.Equal(handled[id], []uint64{1, 2}) {
			t.Errorf("%s handled %v, want [1 2]", id, handled[id])
		}
	}
	if st := e.status(sub).Partitions[0]; st.Active != 0 || st.Waiting != 0 {
		t.Fatalf("%d slots taken and %d aggregates waiting once idle", st.Active, st.Waiting)
	}
}

// A context that is not a live delivery's attempt has no slot to leave.
func TestLeaveSlotWithoutASlot(t *testing.T) {
	if LeaveSlot(context.Background()) {
		t.Fatal("LeaveSlot left a slot outside an attempt")
	}
}

// Delivery.Fresh is set on the first attempt of a live delivery of an event
// appended after the run started, and on no other.
func TestDeliveryFresh(t *testing.T) {
	var mu sync.Mutex
	fresh := map[string]bool{} // agg@version#attempt
	inv := InvokerFunc(func(ctx context.Context, d Delivery) *retry.Failure {
		mu.Lock()
		fresh[fmt.Sprintf("%s@%d#%d", d.Commit.AggregateID, d.Commit.Version, d.Attempt)] = d.Fresh
		mu.Unlock()
		if d.Commit.AggregateID == "b" && d.Attempt == 1 {
			return &retry.Failure{Message: "once"}
		}
		return nil
	})
	e := newEnv(t, Options{Partitions: 1}, spec(sub, inv))
	e.append("Order", "a") // before the run: an earlier run may have attempted it
	e.start()
	checkfor.Eventually(t, func() error { return e.checkpointAt(sub, 2) })
	e.append("Order", "a")
	e.append("Order", "b")
	e.advance() // b's backoff
	checkfor.Eventually(t, func() error { return e.checkpointAt(sub, 4) })
	mu.Lock()
	defer mu.Unlock()
	want := map[string]bool{"a@1#1": false, "a@2#1": true, "b@1#1": true, "b@1#2": false}
	if fmt.Sprint(fresh) != fmt.Sprint(want) {
		t.Fatalf("Fresh by attempt %v, want %v", fresh, want)
	}
}
