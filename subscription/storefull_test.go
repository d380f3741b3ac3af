package subscription

import (
	"context"
	"testing"

	"github.com/berthhq/berth/internal/diskspace"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/retry"
)

// TestStoreFullSpendsNoBudget: while the ledger refuses writes (its data
// directory below the free-space reserve), a failing handler pauses its
// partition as an outage: it is tried again and again without spending its
// budget, and nothing is parked or skipped. When the ledger takes writes
// again the pause ends, failures count, and the aggregate parks after its
// budget as usual, with the park written.
func TestStoreFullSpendsNoBudget(t *testing.T) {
	rec := newRecorder(nil, func(d Delivery, n int) *retry.Failure {
		return &retry.Failure{Classes: []string{"ServiceError"}, Message: "the service failed"}
	})
	s := spec(sub, rec)
	s.OverrideRetry = retry.Settings{MaxAttempts: 2}
	e := newEnv(t, Options{Partitions: 1, Concurrency: 2}, s)
	rec.clock = e.clock
	guard, err := diskspace.New(e.dir, diskspace.Options{Reserve: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer guard.Close()
	e.store.Close(context.Background())
	if e.store, err = ledger.Open(e.dir+"/ledger", ledger.Options{Space: guard}); err != nil {
		t.Fatal(err)
	}
	e.start()
	guard.SetReserve(1 << 62) // more than any disk has free
	e.append("Order", "a")
	before := e.snapshot(sub)

	for range 4 {
		e.advance() // the next probe
	}
	e.blockUntil(1) // the fifth attempt failed too, and the next probe waits
	if n := len(rec.of("a")); n != 5 {
		t.Fatalf("%d attempts while the ledger refused writes, want 5 (2 would have parked)", n)
	}
	st := e.status(sub)
	if st.Partitions[0].State != StateSystemicPaused || len(st.Parked) != 0 {
		t.Fatalf("status while the ledger refuses writes: %+v", st)
	}
	if after := e.snapshot(sub); after != before {
		t.Fatalf("the ledger changed while it refused writes:\n%s\n%s", before, after)
	}

	guard.SetReserve(1)
	e.advance() // the probe fails on its own: the pause ends, this one is not counted
	e.advance() // the first counted failure's backoff; the second counted failure parks
	r := e.waitRecord(sub, "Order", "a", func(*ledger.Record) bool { return true })
	if r.Error.Message != "the service failed" || r.Attempts != 8 {
		t.Fatalf("parked record %+v, want the handler's failure after 8 attempts", r)
	}
	if st := e.status(sub).Partitions[0]; st.State != StateRunning {
		t.Fatalf("partition after the park: %+v", st)
	}
}
