package ledger_test

import (
	"context"
	"errors"
	"testing"

	"github.com/berthhq/berth/internal/diskspace"
	"github.com/berthhq/berth/ledger"
)

// TestUpdateRefusedBelowReserve: while the data directory's free space is
// below the reserve, Update fails with the guard's error without running
// its closure; View goes on; writes resume when the reserve is met again.
func TestUpdateRefusedBelowReserve(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	guard, err := diskspace.New(dir, diskspace.Options{Reserve: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer guard.Close()
	s, err := ledger.Open(dir, ledger.Options{MemTableSize: 4 << 20, BlockCacheSize: 4 << 20, Space: guard})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	set := func(pos uint64) error {
		return s.Update(ctx, func(tx ledger.Tx) error { return tx.SetCheckpoint("s", pos) })
	}
	if err := set(1); err != nil {
		t.Fatal(err)
	}

	guard.SetReserve(1 << 62)
	ran := false
	err = s.Update(ctx, func(tx ledger.Tx) error { ran = true; return tx.SetCheckpoint("s", 2) })
	if !errors.Is(err, diskspace.ErrLow) || ran {
		t.Fatalf("update below the reserve = %v (closure ran: %v), want a *diskspace.Error and no call", err, ran)
	}
	var cp uint64
	if err := s.View(ctx, func(tx ledger.Tx) error { cp, _, err = tx.Checkpoint("s"); return err }); err != nil || cp != 1 {
		t.Fatalf("view below the reserve: checkpoint %d, %v; want 1", cp, err)
	}

	guard.SetReserve(1)
	if err := set(2); err != nil {
		t.Fatalf("update after the reserve was lowered: %v", err)
	}
}
