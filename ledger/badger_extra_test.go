package ledger_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/berthhq/berth/ledger"
)

func TestOpenWithoutDir(t *testing.T) {
	if _, err := ledger.Open("", ledger.Options{}); err == nil {
		t.Fatal("Open with no directory succeeded")
	}
}

func TestInMemory(t *testing.T) {
	ctx := context.Background()
	s, err := ledger.Open("", ledger.Options{InMemory: true, MemTableSize: 4 << 20, BlockCacheSize: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	if err := s.Update(ctx, func(tx ledger.Tx) error { return tx.SetCheckpoint("s", 1) }); err != nil {
		t.Fatal(err)
	}
}

// TestTooBig: a transaction past Badger's batch limit fails with ErrTooBig
// and commits nothing, even when the closure ignores the failed write.
func TestTooBig(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, t.TempDir()) // 4 MiB memtable: about 600 KiB per transaction
	defer s.Close(ctx)
	value := bytes.Repeat([]byte("x"), 200<<10)
	var failed error
	err := s.Update(ctx, func(tx ledger.Tx) error {
		_ = tx.SetCheckpoint("sub", 1)
		for i := range 10 {
			if err := tx.SetMeta("sub", fmt.Sprint(i), value); err != nil && failed == nil {
				failed = err
			}
		}
		return nil // ignores the failure
	})
	if !errors.Is(failed, ledger.ErrTooBig) || !errors.Is(err, ledger.ErrTooBig) {
		t.Fatalf("write error %v, Update error %v; want ErrTooBig for both", failed, err)
	}
	err = s.View(ctx, func(tx ledger.Tx) error {
		if _, ok, _ := tx.Checkpoint("sub"); ok {
			t.Error("part of a too-big transaction was committed")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestTxAfterEnd(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, t.TempDir())
	defer s.Close(ctx)
	var kept ledger.Tx
	if err := s.Update(ctx, func(tx ledger.Tx) error { kept = tx; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := kept.SetCheckpoint("sub", 1); err == nil {
		t.Fatal("a write through a Tx kept past its Update succeeded")
	}
	if _, _, err := kept.Checkpoint("sub"); err == nil {
		t.Fatal("a read through a Tx kept past its Update succeeded")
	}
}

func TestCloseTwice(t *testing.T) {
	s := openTest(t, t.TempDir())
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}
