package logtest

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/berthhq/berth/eventlog"
)

// testTraceparent: the appender's traceparent is kept with its commit and
// read back by Read and ReadAggregate, also after a reopen; a commit
// without one reads back without one; one longer than MaxNameLen is
// refused.
func testTraceparent(t *testing.T, open Opener) {
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	name := t.TempDir()
	l := openAt(t, open, name)
	with := req("order", "o-1", 0)
	with.Traceparent = tp
	written := []eventlog.Commit{mustAppend(t, l, with), mustAppend(t, l, req("order", "o-1", 1))}
	if written[0].Traceparent != tp || written[1].Traceparent != "" {
		t.Fatalf("Append returned traceparents %q and %q", written[0].Traceparent, written[1].Traceparent)
	}
	long := req("order", "o-2", 0)
	long.Traceparent = strings.Repeat("0", eventlog.MaxNameLen+1)
	if _, err := l.Append(context.Background(), long); !errors.Is(err, eventlog.ErrInvalid) {
		t.Errorf("a traceparent of %d bytes: %v, want ErrInvalid", len(long.Traceparent), err)
	}
	check := func(when string) {
		t.Helper()
		read := mustRead(t, l, 1, 10)
		agg, err := l.ReadAggregate(context.Background(), "order", "o-1", 1, 10)
		if err != nil || len(read) != 2 || len(agg) != 2 {
			t.Fatalf("%s: Read %d, ReadAggregate %d commits, %v; want 2 each", when, len(read), len(agg), err)
		}
		for i := range written {
			if d := sameCommit(read[i], written[i]); d != "" {
				t.Errorf("%s: Read commit %d: %s", when, i+1, d)
			}
			if d := sameCommit(agg[i], written[i]); d != "" {
				t.Errorf("%s: ReadAggregate commit %d: %s", when, i+1, d)
			}
		}
	}
	check("before a reopen")
	if err := l.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	l = openAt(t, open, name)
	check("after a reopen")
}
