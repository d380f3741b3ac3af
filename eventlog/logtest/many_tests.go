package logtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/berthhq/berth/eventlog"
)

// testAppendMany appends one batch that holds new aggregates, two appends
// of one aggregate, a version conflict and an invalid request: each is
// decided on its own, the batch's other appends are written, and the log
// holds exactly the appended commits.
func testAppendMany(t *testing.T, open Opener) {
	l := openNew(t, open)
	mustAppend(t, l, req("order", "o-old", 0))
	ctx := context.Background()
	reqs := []eventlog.AppendRequest{
		req("order", "o-1", 0),
		req("order", "o-old", 0), // conflict: o-old is at 1
		req("order", "o-2", eventlog.AnyVersion),
		req("order", "o-1", 1), // sees the batch's first append
		{AggregateType: "order", AggregateID: "o-3", Events: []eventlog.Event{ev("Bad", `{`)}},
		req("order", "o-old", 1),
	}
	out := l.AppendMany(ctx, reqs)
	if len(out) != len(reqs) {
		t.Fatalf("AppendMany returned %d outcomes for %d requests", len(out), len(reqs))
	}
	if !errors.Is(out[1].Err, eventlog.ErrVersionConflict) {
		t.Errorf("outcome 1 (o-old at 0): %v, want ErrVersionConflict", out[1].Err)
	}
	if !errors.Is(out[4].Err, eventlog.ErrInvalid) {
		t.Errorf("outcome 4 (bad JSON): %v, want ErrInvalid", out[4].Err)
	}
	wantVersion := map[int]uint64{0: 1, 2: 1, 3: 2, 5: 2}
	seen := map[uint64]bool{}
	for i, v := range wantVersion {
		o := out[i]
		if o.Err != nil {
			t.Errorf("outcome %d (%s): %v", i, reqs[i].AggregateID, o.Err)
			continue
		}
		if o.Commit.Version != v || o.Commit.AggregateID != reqs[i].AggregateID {
			t.Errorf("outcome %d: %s at version %d, want %s at %d", i, o.Commit.AggregateID, o.Commit.Version, reqs[i].AggregateID, v)
		}
		if o.Commit.Position < 2 || o.Commit.Position > 5 || seen[o.Commit.Position] {
			t.Errorf("outcome %d: position %d, want a distinct one of 2-5", i, o.Commit.Position)
		}
		seen[o.Commit.Position] = true
	}
	if out[0].Err == nil && out[3].Err == nil && out[3].Commit.Position < out[0].Commit.Position {
		t.Errorf("o-1's second append at position %d, before its first at %d", out[3].Commit.Position, out[0].Commit.Position)
	}
	if h := mustHead(t, l); h != 5 {
		t.Errorf("Head = %d after the batch, want 5 (1 + 4 appended)", h)
	}
	for _, c := range mustRead(t, l, 2, 10) {
		if !seen[c.Position] {
			t.Errorf("Read returned a commit at %d that no outcome reported", c.Position)
		}
	}
	if v := mustVersion(t, l, "order", "o-3"); v != 0 {
		t.Errorf("o-3, refused, is at version %d", v)
	}
	if out := l.AppendMany(ctx, nil); len(out) != 0 {
		t.Errorf("AppendMany of nothing returned %d outcomes", len(out))
	}
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for i, o := range l.AppendMany(ctx, reqs[:2]) {
		if !errors.Is(o.Err, eventlog.ErrClosed) {
			t.Errorf("after Close, outcome %d: %v, want ErrClosed", i, o.Err)
		}
	}
}

// testAppendManyConcurrent runs batches and single appends at once, some of
// them to the same aggregates: every append is decided, the positions have
// no gaps, and each aggregate's versions run 1, 2, 3 … in position order.
func testAppendManyConcurrent(t *testing.T, open Opener) {
	l := openNew(t, open)
	const clients, batches, batch = 4, 5, 10
	ctx := context.Background()
	var wg sync.WaitGroup
	var mu sync.Mutex
	appended := 0
	for c := range clients {
		wg.Go(func() {
			for b := range batches {
				reqs := make([]eventlog.AppendRequest, batch)
				for i := range reqs {
					reqs[i] = req("order", fmt.Sprintf("o-%d", (c*batches*batch+b*batch+i)%17), eventlog.AnyVersion)
				}
				n := 0
				for i, o := range l.AppendMany(ctx, reqs) {
					if o.Err != nil {
						t.Errorf("client %d batch %d append %d: %v", c, b, i, o.Err)
						continue
					}
					n++
				}
				if _, err := l.Append(ctx, req("order", fmt.Sprintf("o-%d", c), eventlog.AnyVersion)); err != nil {
					t.Errorf("client %d: single append: %v", c, err)
				} else {
					n++
				}
				mu.Lock()
				appended += n
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	cs := mustRead(t, l, 1, 1000)
	if len(cs) != appended || mustHead(t, l) != uint64(appended) {
		t.Fatalf("the log holds %d commits (head %d), %d were appended", len(cs), mustHead(t, l), appended)
	}
	next := map[string]uint64{}
	for i, c := range cs {
		if c.Position != uint64(i+1) {
			t.Fatalf("commit %d at position %d: a gap", i, c.Position)
		}
		if next[c.AggregateID]++; c.Version != next[c.AggregateID] {
			t.Fatalf("%s: version %d at position %d, want %d", c.AggregateID, c.Version, c.Position, next[c.AggregateID])
		}
	}
}
