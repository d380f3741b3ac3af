package eventlog_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/berthhq/berth/eventlog"
)

func TestOpenWithoutDir(t *testing.T) {
	if _, err := eventlog.Open("", eventlog.Options{}); err == nil {
		t.Fatal("Open with no directory succeeded")
	}
}

func TestInMemory(t *testing.T) {
	ctx := context.Background()
	l, err := eventlog.Open("", eventlog.Options{InMemory: true, MemTableSize: 4 << 20, BlockCacheSize: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(ctx)
	c, err := l.Append(ctx, eventlog.AppendRequest{AggregateType: "t", AggregateID: "i",
		Events: []eventlog.Event{{Type: "E", Payload: []byte(`{}`)}}})
	if err != nil || c.Position != 1 {
		t.Fatalf("append: %+v, %v", c, err)
	}
}

// TestLargeCommit: a commit above the value threshold goes to Badger's value
// log and reads back whole, also after reopening.
func TestLargeCommit(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l, err := eventlog.Open(dir, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	payload := append(append([]byte(`"`), bytes.Repeat([]byte("x"), 2<<20)...), '"')
	if _, err = l.Append(ctx, eventlog.AppendRequest{AggregateType: "t", AggregateID: "i",
		Events: []eventlog.Event{{Type: "E", Payload: payload}, {Type: "F", Payload: []byte("1")}}}); err != nil {
		t.Fatalf("append of a 2 MiB commit: %v", err)
	}
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if l, err = eventlog.Open(dir, testOptions()); err != nil {
		t.Fatal(err)
	}
	defer l.Close(ctx)
	cs, err := l.Read(ctx, 1, 1)
	if err != nil || len(cs) != 1 || !bytes.Equal(cs[0].Events[0].Payload, payload) || string(cs[0].Events[1].Payload) != "1" {
		t.Fatalf("read back: %d commits, %v", len(cs), err)
	}
}

// TestGroupCommitSplitsWhatDoesNotFit: appends that wait together are
// written in one transaction; when they do not fit in one (16 appenders of
// 200 KiB commits against a 4 MiB memtable, which takes ~600 KiB in one
// transaction), the group is written in several. Every append succeeds
// once, positions and versions have no gaps, and every payload reads back.
func TestGroupCommitSplitsWhatDoesNotFit(t *testing.T) {
	ctx := context.Background()
	l, err := eventlog.Open(t.TempDir(), eventlog.Options{MemTableSize: 4 << 20, BlockCacheSize: 4 << 20, SyncWrites: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(ctx)
	const appenders, each = 16, 8
	payload := func(w, i int) []byte {
		return fmt.Appendf(nil, "%q", fmt.Sprintf("%d-%d-", w, i)+strings.Repeat("x", 200<<10))
	}
	var wg sync.WaitGroup
	errs := make(chan error, appenders*each)
	for w := range appenders {
		wg.Go(func() {
			for i := range each {
				_, err := l.Append(ctx, eventlog.AppendRequest{AggregateType: "t", AggregateID: fmt.Sprint("a-", w%4),
					ExpectedVersion: eventlog.AnyVersion, Events: []eventlog.Event{{Type: "E", Payload: payload(w, i)}}})
				if err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("append: %v", err)
	}
	cs, err := l.Read(ctx, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != appenders*each {
		t.Fatalf("read %d commits, want %d", len(cs), appenders*each)
	}
	versions := map[string]uint64{}
	seen := map[string]bool{}
	for i, c := range cs {
		if c.Position != uint64(i+1) {
			t.Fatalf("commit %d at position %d", i, c.Position)
		}
		versions[c.AggregateID]++
		if c.Version != versions[c.AggregateID] {
			t.Fatalf("%s: version %d at position %d, want %d", c.AggregateID, c.Version, c.Position, versions[c.AggregateID])
		}
		seen[string(c.Events[0].Payload)] = true
	}
	for w := range appenders {
		for i := range each {
			if !seen[string(payload(w, i))] {
				t.Errorf("payload %d-%d not read back", w, i)
			}
		}
	}
}
