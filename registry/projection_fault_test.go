package registry_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/berthhq/berth/subscription"
)

// A group commit the ledger refuses (its disk guard, a real
// diskspace.Guard, below the free-space reserve) while half of its calls
// wait off their partitions' slots (subscription.LeaveSlot): each call is
// told, its partition pauses for the store, nothing is parked, and once
// the ledger takes writes again every event is applied exactly once: the
// summaries are the fold of the events.
func TestProjectionGroupRefusedOffSlot(t *testing.T) {
	e := newProjEnv(t, 64)
	release := holdStore(t, e.store)
	e.orders("ann", 0, 40)
	e.orders("bob", 0, 40)
	// 4 partitions x 4 calls on their slots and as many off them.
	projEventually(t, func() error { return waiting(e.proj, 4*4*2) })
	e.asm.Disk.SetReserve(1 << 62) // more than any disk has free
	release()
	projEventually(t, func() error {
		st, err := e.eng.Status(context.Background(), summarySub)
		if err != nil {
			return err
		}
		for _, p := range st.Partitions {
			if p.State == subscription.StateSystemicPaused {
				return nil
			}
		}
		return fmt.Errorf("no partition paused for the store: %+v", st.Partitions)
	})
	e.asm.Disk.SetReserve(int64(e.cfg.Store.MinFree))
	e.waitCaughtUp()
	want := orderSummary{Orders: 40, Shipped: 20, Total: 4000}
	wantSummaries(t, e, map[string]orderSummary{"ann": want, "bob": want})
	st, err := e.eng.Status(context.Background(), summarySub)
	if err != nil {
		t.Fatal(err)
	}
	for state, n := range st.Parked {
		if n != 0 {
			t.Errorf("%d aggregates %s", n, state)
		}
	}
}
