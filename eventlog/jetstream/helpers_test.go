package jetstream_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/eventlog/jetstream"
)

func open(t testing.TB, urls string, opts jetstream.Options) *jetstream.Log {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := jetstream.Open(ctx, connect(t, urls), opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { l.Close(context.Background()) })
	return l
}

func req(typ, id string, expected int64) eventlog.AppendRequest {
	return eventlog.AppendRequest{AggregateType: typ, AggregateID: id, ExpectedVersion: expected,
		Events: []eventlog.Event{{Type: "Happened", Payload: []byte(`{"n":1}`)}}}
}

func mustAppend(t testing.TB, l eventlog.Log, r eventlog.AppendRequest) eventlog.Commit {
	t.Helper()
	c, err := l.Append(context.Background(), r)
	if err != nil {
		t.Fatalf("append %s/%q at %d: %v", r.AggregateType, r.AggregateID, r.ExpectedVersion, err)
	}
	return c
}

// checkLog reads the whole log and checks positions 1..n without gaps and
// every aggregate's versions 1, 2, 3 … in position order.
func checkLog(t testing.TB, l eventlog.Log, n int) []eventlog.Commit {
	t.Helper()
	var all []eventlog.Commit
	for {
		cs, err := l.Read(context.Background(), uint64(len(all))+1, 0)
		if err != nil {
			t.Fatalf("read from %d: %v", len(all)+1, err)
		}
		if len(cs) == 0 {
			break
		}
		all = append(all, cs...)
	}
	if len(all) != n {
		t.Fatalf("the log holds %d commits, want %d", len(all), n)
	}
	versions := map[string]uint64{}
	for i, c := range all {
		if c.Position != uint64(i+1) {
			t.Fatalf("commit %d at position %d", i, c.Position)
		}
		k := fmt.Sprintf("%s/%q", c.AggregateType, c.AggregateID)
		versions[k]++
		if c.Version != versions[k] {
			t.Fatalf("%s: version %d at position %d, want %d", k, c.Version, c.Position, versions[k])
		}
	}
	return all
}
