package eventlog_test

import (
	"bytes"
	"context"
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
