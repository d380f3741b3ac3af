package assembly_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/berthhq/berth/assembly"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/internal/testing/natstest"
	"github.com/berthhq/berth/ledger"
	"github.com/nats-io/nats.go/jetstream"
)

// TestLedgerCompactionFromConfig: store.jetstream.ledger-compact-every and
// -keep reach the shared ledger: past 60 transactions a host snapshots its
// cache and purges the ledger's stream before the last 20 ahead of the
// point; what was written before is still there.
func TestLedgerCompactionFromConfig(t *testing.T) {
	srv := natstest.RunServer(t)
	cfg := clusterConfig(t, srv.URL(), "h1")
	cfg.Store.JetStream.Stream = "COMPACT"
	cfg.Store.JetStream.LedgerCompactEvery = 60
	cfg.Store.JetStream.LedgerCompactKeep = 20
	h := open(t, cfg, assembly.Options{})
	ctx := t.Context()
	for i := range 100 {
		if err := h.Ledger.Update(ctx, func(tx ledger.Tx) error { return tx.SetCheckpoint(fmt.Sprint("sub-", i), uint64(i)) }); err != nil {
			t.Fatal(err)
		}
	}
	js, err := jetstream.New(h.NATS)
	if err != nil {
		t.Fatal(err)
	}
	var first, last uint64
	checkfor.Nil(t, 20*time.Second, 20*time.Millisecond, func() error {
		s, err := js.Stream(ctx, "COMPACT_LEDGER")
		if err != nil {
			return err
		}
		first, last = s.CachedInfo().State.FirstSeq, s.CachedInfo().State.LastSeq
		if first <= 1 {
			return fmt.Errorf("the ledger's stream not purged: sequences %d..%d", first, last)
		}
		return nil
	})
	// At most the 20 kept before the last point and the 60 after it.
	if kept := last - first + 1; kept > 20+60 {
		t.Errorf("the stream keeps %d transactions (%d..%d) compacting every 60, keeping 20", kept, first, last)
	}
	if _, err := js.ObjectStore(ctx, "COMPACT_LEDGER_SNAPSHOTS"); err != nil {
		t.Errorf("no snapshots' object store: %v", err)
	}
	if err := h.Ledger.View(ctx, func(tx ledger.Tx) error {
		for i := range 100 {
			if p, _, err := tx.Checkpoint(fmt.Sprint("sub-", i)); err != nil || p != uint64(i) {
				return fmt.Errorf("checkpoint sub-%d = %d, %v", i, p, err)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
