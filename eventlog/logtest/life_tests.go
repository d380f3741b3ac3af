package logtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/eventlog"
)

func testWait(t *testing.T, open Opener) {
	l := openNew(t, open)
	ctx := context.Background()

	// Wakes on append.
	ch := waitResult(ctx, l, 0)
	expectBlocked(t, ch)
	mustAppend(t, l, req("order", "o-1", 0))
	if err := expectResult(t, ch); err != nil {
		t.Fatalf("Wait(0) after an append: %v", err)
	}
	// Returns at once when the head is already past.
	if err := l.Wait(ctx, 0); err != nil {
		t.Fatalf("Wait(0) with head 1: %v", err)
	}
	// Waits for a later position, not just any append.
	ch = waitResult(ctx, l, 2)
	mustAppend(t, l, req("order", "o-1", 1))
	expectBlocked(t, ch)
	mustAppend(t, l, req("order", "o-1", 2))
	if err := expectResult(t, ch); err != nil {
		t.Fatalf("Wait(2) after the third append: %v", err)
	}
	// Honours cancel and deadline.
	cctx, cancel := context.WithCancel(ctx)
	ch = waitResult(cctx, l, 3)
	expectBlocked(t, ch)
	cancel()
	if err := expectResult(t, ch); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait after cancel: %v, want context.Canceled", err)
	}
	dctx, dcancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer dcancel()
	if err := l.Wait(dctx, 3); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait past its deadline: %v, want context.DeadlineExceeded", err)
	}
	// Many waiters wake on one append.
	var chs []<-chan error
	for range 10 {
		chs = append(chs, waitResult(ctx, l, 3))
	}
	mustAppend(t, l, req("order", "o-2", 0))
	for _, ch := range chs {
		if err := expectResult(t, ch); err != nil {
			t.Fatalf("one of many waiters: %v", err)
		}
	}
}

func testClosed(t *testing.T, open Opener) {
	l := openNew(t, open)
	ctx := context.Background()
	mustAppend(t, l, req("order", "o-1", 0))
	ch := waitResult(ctx, l, 1)
	expectBlocked(t, ch)
	if err := l.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := expectResult(t, ch); !errors.Is(err, eventlog.ErrClosed) {
		t.Fatalf("Wait blocked across Close: %v, want ErrClosed", err)
	}
	calls := map[string]error{}
	_, calls["Append"] = l.Append(ctx, req("order", "o-1", 1))
	_, calls["Read"] = l.Read(ctx, 0, 0)
	_, calls["ReadAggregate"] = l.ReadAggregate(ctx, "order", "o-1", 0, 0)
	_, calls["Head"] = l.Head(ctx)
	_, calls["Version"] = l.Version(ctx, "order", "o-1")
	calls["Wait"] = l.Wait(ctx, 5)
	for name, err := range calls {
		if !errors.Is(err, eventlog.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
}

func testReopen(t *testing.T, open Opener) {
	name := t.TempDir()
	ctx := context.Background()
	l := openAt(t, open, name)
	var written []eventlog.Commit
	for i := range 5 {
		written = append(written, mustAppend(t, l, req("order", fmt.Sprintf("o-%d", i%2), eventlog.AnyVersion,
			ev("E", fmt.Sprintf(`{"i":%d}`, i)))))
	}
	if err := l.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for round := range 2 {
		l = openAt(t, open, name)
		if h := mustHead(t, l); h != uint64(len(written)) {
			t.Fatalf("round %d: Head after reopen = %d, want %d", round, h, len(written))
		}
		read := mustRead(t, l, 0, 0)
		if len(read) != len(written) {
			t.Fatalf("round %d: %d commits after reopen, want %d", round, len(read), len(written))
		}
		for i := range read {
			if d := sameCommit(read[i], written[i]); d != "" {
				t.Fatalf("round %d: commit %d differs after reopen: %s", round, i, d)
			}
		}
		if v := mustVersion(t, l, "order", "o-0"); v != 3+uint64(round) {
			t.Fatalf("round %d: Version(o-0) after reopen = %d", round, v)
		}
		c := mustAppend(t, l, req("order", "o-0", int64(3+round)))
		if c.Position != uint64(len(written))+1 {
			t.Fatalf("round %d: first append after reopen at position %d, want %d", round, c.Position, len(written)+1)
		}
		written = append(written, c)
		if err := l.Close(ctx); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
}

func testConcurrent(t *testing.T, open Opener) {
	l := openNew(t, open)
	const writers, each = 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				// Half the writers share one aggregate through AnyVersion.
				id, expected := fmt.Sprintf("w-%d", w), int64(i)
				if w%2 == 1 {
					id, expected = "shared", eventlog.AnyVersion
				}
				if _, err := l.Append(context.Background(), req("order", id, expected)); err != nil {
					errs <- err
				}
			}
		})
	}
	// A reader follows the log while it grows.
	readDone := make(chan error, 1)
	go func() {
		var next uint64 = 1
		for next <= writers*each {
			if err := l.Wait(context.Background(), next-1); err != nil {
				readDone <- err
				return
			}
			cs, err := l.Read(context.Background(), next, 7)
			if err != nil {
				readDone <- err
				return
			}
			for _, c := range cs {
				if c.Position != next {
					readDone <- fmt.Errorf("follower read position %d, want %d", c.Position, next)
					return
				}
				next++
			}
		}
		readDone <- nil
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent append: %v", err)
	}
	if err := expectResult(t, readDone); err != nil {
		t.Fatalf("follower: %v", err)
	}
	all := mustRead(t, l, 0, 0)
	if !equalU64(positions(all), seq(1, writers*each)) {
		t.Fatalf("positions are not 1..%d without gaps: %v", writers*each, positions(all))
	}
	perAggregate := map[string]uint64{}
	for _, c := range all {
		perAggregate[c.AggregateID]++
		if c.Version != perAggregate[c.AggregateID] {
			t.Fatalf("%s: version %d at position %d, want %d", c.AggregateID, c.Version, c.Position, perAggregate[c.AggregateID])
		}
	}
	if v := mustVersion(t, l, "order", "shared"); v != writers/2*each {
		t.Fatalf("Version(shared) = %d, want %d", v, writers/2*each)
	}
}

// testConcurrentConflicts races appends at the same expected version: one
// wins each round, the others get ErrVersionConflict.
func testConcurrentConflicts(t *testing.T, open Opener) {
	l := openNew(t, open)
	const racers, rounds = 6, 10
	for round := range rounds {
		var wg sync.WaitGroup
		results := make(chan error, racers)
		for range racers {
			wg.Go(func() {
				_, err := l.Append(context.Background(), req("order", "o-1", int64(round)))
				results <- err
			})
		}
		wg.Wait()
		close(results)
		won := 0
		for err := range results {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, eventlog.ErrVersionConflict):
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if won != 1 {
			t.Fatalf("round %d: %d appends won, want 1", round, won)
		}
	}
	if h := mustHead(t, l); h != rounds {
		t.Fatalf("Head = %d, want %d", h, rounds)
	}
}

func testCanceled(t *testing.T, open Opener) {
	l := openNew(t, open)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.Append(ctx, req("order", "o-1", 0)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Append with a canceled context: %v, want context.Canceled", err)
	}
	if h := mustHead(t, l); h != 0 {
		t.Fatalf("Head = %d after a canceled append", h)
	}
	if _, err := l.Read(ctx, 0, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("Read with a canceled context: %v, want context.Canceled", err)
	}
}
