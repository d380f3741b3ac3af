package ledger_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
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

// TestGroupCommit: Updates that wait together are committed together, and
// each still stands alone: from 16 goroutines, every third closure fails
// after writing (rolled back alone), every fifth writes ~200 KiB (so a group
// outgrows one transaction and is split), and one panics (raised on its own
// caller's goroutine, its writes rolled back). Every other write is there,
// and each Update returned its own outcome.
func TestGroupCommit(t *testing.T) {
	ctx := context.Background()
	s, err := ledger.Open(t.TempDir(), ledger.Options{MemTableSize: 4 << 20, BlockCacheSize: 4 << 20, SyncWrites: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	const writers, each = 16, 12
	big := bytes.Repeat([]byte("x"), 200<<10)
	errFail := errors.New("this closure fails")
	type outcome struct {
		key      string
		err      error
		panicked any
	}
	results := make(chan outcome, writers*each)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				key := fmt.Sprintf("%d-%d", w, i)
				o := outcome{key: key}
				func() {
					defer func() { o.panicked = recover() }()
					o.err = s.Update(ctx, func(tx ledger.Tx) error {
						value := []byte(key)
						if (w*each+i)%5 == 0 {
							value = append(value, big...)
						}
						if err := tx.SetMeta("sub", key, value); err != nil {
							return err
						}
						switch {
						case w == 7 && i == 5:
							panic("a closure panics")
						case (w*each+i)%3 == 0:
							return errFail
						}
						return nil
					})
				}()
				results <- o
			}
		})
	}
	wg.Wait()
	close(results)
	committed := 0
	for o := range results {
		var w, i int
		fmt.Sscanf(o.key, "%d-%d", &w, &i)
		wantFail := (w*each+i)%3 == 0
		wantPanic := w == 7 && i == 5
		switch {
		case wantPanic:
			if o.panicked != "a closure panics" {
				t.Errorf("%s: panic %v on its caller, want the closure's", o.key, o.panicked)
			}
		case o.panicked != nil:
			t.Errorf("%s: panicked with %v, another closure's panic", o.key, o.panicked)
		case wantFail && !errors.Is(o.err, errFail):
			t.Errorf("%s: Update returned %v, want its closure's error", o.key, o.err)
		case !wantFail && o.err != nil:
			t.Errorf("%s: Update returned %v", o.key, o.err)
		}
		err := s.View(ctx, func(tx ledger.Tx) error {
			v, err := tx.Meta("sub", o.key)
			switch {
			case wantFail || wantPanic:
				if !errors.Is(err, ledger.ErrNotFound) {
					t.Errorf("%s: a failed Update's write is there (%v)", o.key, err)
				}
			case err != nil:
				t.Errorf("%s: a committed write is missing: %v", o.key, err)
			case !bytes.HasPrefix(v, []byte(o.key)):
				t.Errorf("%s: holds %.20q", o.key, v)
			default:
				committed++
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if committed == 0 {
		t.Fatal("nothing committed")
	}
}
