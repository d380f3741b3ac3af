package jetstream_test

import (
	"context"
	"strings"
	"testing"

	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/internal/testing/natstest"
)

// Ids and types holding what subjects cannot — slashes, dots, spaces,
// wildcards, unicode, control bytes — and names too long for a plain token
// each keep their own aggregate.
func TestOddNames(t *testing.T) {
	srv := natstest.RunServer(t)
	l := open(t, srv.URL(), optionsFor(t.Name(), 1))
	long := strings.Repeat("x", eventlog.MaxNameLen)
	names := [][2]string{
		{"order", "a/b"}, {"order", "a.b"}, {"order", "a b"}, {"order", "a*"}, {"order", ">"}, {"order", "*"},
		{"order", "a.>"}, {"order", "ünïcødé ✓"}, {"order", "\x00\r\n\t"}, {"order", "."}, {"order", ".."},
		{"order.line", "1"}, {"order", "line.1"}, {"a b", "c"}, {"*", ">"},
		{"order", long}, {"order", long[1:]}, {long, "1"}, {long, long},
		{"order", strings.Repeat("y", 48)}, {"order", strings.Repeat("y", 49)}, // either side of the hashed form
	}
	for i, n := range names {
		for v := range i + 1 {
			mustAppend(t, l, req(n[0], n[1], int64(v)))
		}
	}
	for i, n := range names {
		want := uint64(i + 1)
		if v, err := l.Version(context.Background(), n[0], n[1]); err != nil || v != want {
			t.Errorf("Version(%.20q, %.20q) = %d, %v; want %d", n[0], n[1], v, err, want)
		}
		cs, err := l.ReadAggregate(context.Background(), n[0], n[1], 0, 0)
		if err != nil || uint64(len(cs)) != want {
			t.Fatalf("ReadAggregate(%.20q, %.20q) = %d commits, %v; want %d", n[0], n[1], len(cs), err, want)
		}
		for _, c := range cs {
			if c.AggregateType != n[0] || c.AggregateID != n[1] {
				t.Fatalf("ReadAggregate(%.20q, %.20q) returned %.20q/%.20q", n[0], n[1], c.AggregateType, c.AggregateID)
			}
		}
	}
	total := len(names) * (len(names) + 1) / 2
	checkLog(t, l, total)
}

// ReadAggregate finds any version of a long aggregate whose commits are
// interleaved with others' (the binary search over sequences).
func TestReadAggregateFromAnyVersion(t *testing.T) {
	srv := natstest.RunServer(t)
	l := open(t, srv.URL(), optionsFor(t.Name(), 1))
	const n = 40
	for v := range int64(n) {
		mustAppend(t, l, req("order", "long", v))
		for range v % 3 { // a changing number of others between its commits
			mustAppend(t, l, req("order", "other", eventlog.AnyVersion))
		}
	}
	for from := uint64(0); from <= n+1; from++ {
		for _, limit := range []int{0, 1, 7} {
			cs, err := l.ReadAggregate(context.Background(), "order", "long", from, limit)
			if err != nil {
				t.Fatalf("ReadAggregate(from %d, limit %d): %v", from, limit, err)
			}
			first := max(from, 1)
			want := int(min(uint64(n+1)-min(first, n+1), uint64(eventlog.ReadLimit(limit))))
			if len(cs) != want {
				t.Fatalf("ReadAggregate(from %d, limit %d) = %d commits, want %d", from, limit, len(cs), want)
			}
			for i, c := range cs {
				if c.Version != first+uint64(i) || c.AggregateID != "long" {
					t.Fatalf("ReadAggregate(from %d, limit %d)[%d] = %s version %d", from, limit, i, c.AggregateID, c.Version)
				}
			}
		}
	}
}
