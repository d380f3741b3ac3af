package logtest

import (
	"context"
	"fmt"
	"testing"

	"github.com/berthhq/berth/eventlog"
)

func testRead(t *testing.T, open Opener) {
	l := openNew(t, open)
	for i := range 10 {
		mustAppend(t, l, req("order", fmt.Sprintf("o-%d", i%3), eventlog.AnyVersion))
	}
	tests := []struct {
		from  uint64
		limit int
		want  []uint64
	}{
		{0, 0, seq(1, 10)},
		{1, 0, seq(1, 10)},
		{0, -1, seq(1, 10)},
		{1, 100, seq(1, 10)},
		{4, 3, seq(4, 6)},
		{9, 5, seq(9, 10)},
		{10, 1, seq(10, 10)},
		{11, 5, nil},
		{1 << 40, 5, nil},
	}
	for _, tc := range tests {
		got := positions(mustRead(t, l, tc.from, tc.limit))
		if !equalU64(got, tc.want) {
			t.Errorf("Read(%d, %d) = %v, want %v", tc.from, tc.limit, got, tc.want)
		}
	}
}

func testReadAggregate(t *testing.T, open Opener) {
	l := openNew(t, open)
	// o-a gets positions 1,3,5,7,9; o-b gets 2,4,6,8,10.
	for i := range 10 {
		mustAppend(t, l, req("order", []string{"o-a", "o-b"}[i%2], eventlog.AnyVersion))
	}
	mustAppend(t, l, req("invoice", "o-a", 0)) // same id, other type
	tests := []struct {
		id          string
		fromVersion uint64
		limit       int
		versions    []uint64
		positions   []uint64
	}{
		{"o-a", 0, 0, seq(1, 5), []uint64{1, 3, 5, 7, 9}},
		{"o-a", 1, 0, seq(1, 5), []uint64{1, 3, 5, 7, 9}},
		{"o-b", 3, 0, seq(3, 5), []uint64{6, 8, 10}},
		{"o-b", 2, 2, seq(2, 3), []uint64{4, 6}},
		{"o-b", 5, 10, seq(5, 5), []uint64{10}},
		{"o-b", 6, 10, nil, nil},
		{"o-c", 0, 10, nil, nil},
	}
	for _, tc := range tests {
		cs, err := l.ReadAggregate(context.Background(), "order", tc.id, tc.fromVersion, tc.limit)
		if err != nil {
			t.Fatalf("ReadAggregate(%s, %d, %d): %v", tc.id, tc.fromVersion, tc.limit, err)
		}
		if !equalU64(versions(cs), tc.versions) || !equalU64(positions(cs), tc.positions) {
			t.Errorf("ReadAggregate(%s, %d, %d): versions %v positions %v, want %v %v",
				tc.id, tc.fromVersion, tc.limit, versions(cs), positions(cs), tc.versions, tc.positions)
		}
		for _, c := range cs {
			if c.AggregateType != "order" || c.AggregateID != tc.id {
				t.Errorf("ReadAggregate(%s) returned a commit of %s/%s", tc.id, c.AggregateType, c.AggregateID)
			}
		}
	}
	cs, err := l.ReadAggregate(context.Background(), "invoice", "o-a", 0, 0)
	if err != nil || !equalU64(positions(cs), []uint64{11}) {
		t.Fatalf("ReadAggregate(invoice) = %v, %v; want position 11", positions(cs), err)
	}
}

func testEmpty(t *testing.T, open Opener) {
	l := openNew(t, open)
	if h := mustHead(t, l); h != 0 {
		t.Fatalf("Head of an empty log = %d", h)
	}
	if v := mustVersion(t, l, "order", "o-1"); v != 0 {
		t.Fatalf("Version of an unknown aggregate = %d", v)
	}
	if cs := mustRead(t, l, 0, 0); len(cs) != 0 {
		t.Fatalf("Read of an empty log = %d commits", len(cs))
	}
}

// testNames appends to aggregates whose type and id, joined naively, would
// be the same string, and checks that each keeps its own stream.
func testNames(t *testing.T, open Opener) {
	l := openNew(t, open)
	names := [][2]string{
		{"ab", "c"}, {"a", "bc"}, {"a\x00b", "c"}, {"a", "b\x00c"}, {"a/b", "c"}, {"a", "b/c"},
		{"a\x01", "\x00"}, {"a", "\x01\x00"}, {"\xff\xff", "\xff"}, {"\xff", "\xff\xff"}, {"ünï", "cødé"},
		// Dots are refused only as a whole name ("." and ".."); percent signs are plain bytes.
		{"a", "..."}, {"a", ".a"}, {"a", "%2E%2E"}, {"a", "a%2Fb"}, {"a", "a/b/.."},
	}
	for i, n := range names {
		for range i + 1 {
			mustAppend(t, l, req(n[0], n[1], eventlog.AnyVersion))
		}
	}
	for i, n := range names {
		if v := mustVersion(t, l, n[0], n[1]); v != uint64(i+1) {
			t.Errorf("Version(%q, %q) = %d, want %d", n[0], n[1], v, i+1)
		}
		cs, err := l.ReadAggregate(context.Background(), n[0], n[1], 0, 0)
		if err != nil || len(cs) != i+1 {
			t.Fatalf("ReadAggregate(%q, %q) = %d commits, %v; want %d", n[0], n[1], len(cs), err, i+1)
		}
		for _, c := range cs {
			if c.AggregateType != n[0] || c.AggregateID != n[1] {
				t.Errorf("ReadAggregate(%q, %q) returned %q/%q", n[0], n[1], c.AggregateType, c.AggregateID)
			}
		}
	}
}
