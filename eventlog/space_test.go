package eventlog_test

import (
	"context"
	"errors"
	"testing"

	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/internal/diskspace"
)

// TestAppendRefusedBelowReserve: while the data directory's free space is
// below the reserve, Append fails with the guard's error and stores
// nothing; reads go on; appends resume when the reserve is met again.
func TestAppendRefusedBelowReserve(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	guard, err := diskspace.New(dir, diskspace.Options{Reserve: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer guard.Close()
	opts := testOptions()
	opts.Space = guard
	l, err := eventlog.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(ctx)
	req := eventlog.AppendRequest{AggregateType: "t", AggregateID: "i", ExpectedVersion: eventlog.AnyVersion, Events: []eventlog.Event{{Type: "E", Payload: []byte(`{}`)}}}
	if _, err := l.Append(ctx, req); err != nil {
		t.Fatal(err)
	}

	guard.SetReserve(1 << 62) // more than any disk has free
	_, err = l.Append(ctx, req)
	var de *diskspace.Error
	if !errors.As(err, &de) || !errors.Is(err, diskspace.ErrLow) {
		t.Fatalf("append below the reserve = %v, want a *diskspace.Error", err)
	}
	if head, _ := l.Head(ctx); head != 1 {
		t.Fatalf("head after a refused append = %d, want 1", head)
	}
	if cs, err := l.Read(ctx, 1, 10); err != nil || len(cs) != 1 {
		t.Fatalf("read below the reserve: %d commits, %v", len(cs), err)
	}

	guard.SetReserve(1)
	if c, err := l.Append(ctx, req); err != nil || c.Position != 2 {
		t.Fatalf("append after the reserve was lowered: %+v, %v", c, err)
	}
}
