package logtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/berthhq/berth/eventlog"
)

func testRoundTrip(t *testing.T, open Opener) {
	l := openNew(t, open)
	at := time.Date(2025, 3, 4, 5, 6, 7, 891011121, time.UTC)
	r := eventlog.AppendRequest{
		AggregateType:   "order",
		AggregateID:     "o-1",
		ExpectedVersion: 0,
		OwnerID:         "buyer-7",
		Time:            at,
		Events: []eventlog.Event{
			ev("OrderCreated", `{"items":[1,2,3],"note":"ü \"quoted\""}`),
			ev("OrderPaid", `42`),
		},
	}
	got := mustAppend(t, l, r)
	want := eventlog.Commit{
		Position: 1, AggregateType: "order", AggregateID: "o-1", Version: 1,
		OwnerID: "buyer-7", Time: at, Events: r.Events,
	}
	if d := sameCommit(got, want); d != "" {
		t.Fatalf("Append returned a different commit: %s", d)
	}
	read := mustRead(t, l, 1, 10)
	if len(read) != 1 {
		t.Fatalf("Read returned %d commits, want 1", len(read))
	}
	if d := sameCommit(read[0], want); d != "" {
		t.Fatalf("Read returned a different commit: %s", d)
	}
	agg, err := l.ReadAggregate(context.Background(), "order", "o-1", 1, 10)
	if err != nil || len(agg) != 1 {
		t.Fatalf("ReadAggregate = %d commits, %v; want 1", len(agg), err)
	}
	if d := sameCommit(agg[0], want); d != "" {
		t.Fatalf("ReadAggregate returned a different commit: %s", d)
	}
}

func testVersions(t *testing.T, open Opener) {
	l := openNew(t, open)
	for i := int64(0); i < 3; i++ {
		c := mustAppend(t, l, req("order", "o-1", i))
		if c.Version != uint64(i+1) || c.Position != uint64(i+1) {
			t.Fatalf("append %d: version %d position %d, want %d %d", i, c.Version, c.Position, i+1, i+1)
		}
		if v := mustVersion(t, l, "order", "o-1"); v != uint64(i+1) {
			t.Fatalf("Version = %d after append %d", v, i)
		}
	}
	if h := mustHead(t, l); h != 3 {
		t.Fatalf("Head = %d, want 3", h)
	}
}

func testConflict(t *testing.T, open Opener) {
	l := openNew(t, open)
	mustAppend(t, l, req("order", "o-1", 0))
	mustAppend(t, l, req("order", "o-1", 1))
	for _, expected := range []int64{0, 1, 3, 17} {
		_, err := l.Append(context.Background(), req("order", "o-1", expected))
		if !errors.Is(err, eventlog.ErrVersionConflict) {
			t.Fatalf("expected %d: err = %v, want ErrVersionConflict", expected, err)
		}
		if !errContains(err, "2", itoa(expected)) {
			t.Errorf("expected %d: error %q does not name both versions", expected, err)
		}
	}
	// A new aggregate is at version 0.
	if _, err := l.Append(context.Background(), req("order", "o-2", 1)); !errors.Is(err, eventlog.ErrVersionConflict) {
		t.Fatalf("new aggregate at expected 1: err = %v, want ErrVersionConflict", err)
	}
	if h := mustHead(t, l); h != 2 {
		t.Fatalf("Head = %d after conflicts, want 2", h)
	}
	if v := mustVersion(t, l, "order", "o-1"); v != 2 {
		t.Fatalf("Version = %d after conflicts, want 2", v)
	}
	if v := mustVersion(t, l, "order", "o-2"); v != 0 {
		t.Fatalf("Version of o-2 = %d after conflict, want 0", v)
	}
	if c := mustAppend(t, l, req("order", "o-1", 2)); c.Position != 3 || c.Version != 3 {
		t.Fatalf("append after conflicts: position %d version %d, want 3 3", c.Position, c.Version)
	}
}

func itoa(i int64) string {
	if i < 0 {
		return "-" + itoa(-i)
	}
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

func testAnyVersion(t *testing.T, open Opener) {
	l := openNew(t, open)
	for want := uint64(1); want <= 3; want++ {
		c := mustAppend(t, l, req("order", "o-1", eventlog.AnyVersion))
		if c.Version != want {
			t.Fatalf("AnyVersion append: version %d, want %d", c.Version, want)
		}
	}
	mustAppend(t, l, req("order", "o-1", 3)) // the check still works afterwards
}

func testInvalid(t *testing.T, open Opener) {
	l := openNew(t, open)
	mustAppend(t, l, req("order", "o-1", 0))
	long := string(make([]byte, eventlog.MaxNameLen+1))
	tests := []struct {
		name  string
		req   eventlog.AppendRequest
		err   error
		parts []string // the error must name these
	}{
		{"no events", eventlog.AppendRequest{AggregateType: "order", AggregateID: "o-1", ExpectedVersion: 1}, eventlog.ErrEmptyCommit, nil},
		{"empty events", eventlog.AppendRequest{AggregateType: "order", AggregateID: "o-1", ExpectedVersion: 1, Events: []eventlog.Event{}}, eventlog.ErrEmptyCommit, nil},
		{"no aggregate type", req("", "o-1", 1), eventlog.ErrInvalid, []string{"aggregate type"}},
		{"no aggregate id", req("order", "", 1), eventlog.ErrInvalid, []string{"aggregate id"}},
		{"aggregate id too long", req("order", long, 0), eventlog.ErrInvalid, []string{"aggregate id"}},
		{"no event type", req("order", "o-1", 1, ev("A", `{}`), ev("", `{}`)), eventlog.ErrInvalid, []string{"event 1", "type"}},
		{"bad JSON", req("order", "o-1", 1, ev("A", `{}`), ev("B", `{}`), ev("C", `{"a":`)), eventlog.ErrInvalid, []string{"event 2", "JSON"}},
		{"not JSON at all", req("order", "o-1", 1, ev("A", `hello`)), eventlog.ErrInvalid, []string{"event 0", "JSON"}},
		{"two JSON values", req("order", "o-1", 1, ev("A", `{} {}`)), eventlog.ErrInvalid, []string{"event 0"}},
		{"expected below AnyVersion", req("order", "o-1", -2), eventlog.ErrInvalid, []string{"-2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := l.Append(context.Background(), tc.req)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if len(tc.parts) > 0 && !errContains(err, tc.parts...) {
				t.Errorf("error %q does not name %q", err, tc.parts)
			}
			if h := mustHead(t, l); h != 1 {
				t.Fatalf("Head = %d after a rejected append, want 1", h)
			}
			if v := mustVersion(t, l, "order", "o-1"); v != 1 {
				t.Fatalf("Version = %d after a rejected append, want 1", v)
			}
			if n := len(mustRead(t, l, 0, 0)); n != 1 {
				t.Fatalf("log holds %d commits after a rejected append, want 1", n)
			}
		})
	}
}

func testEmptyPayload(t *testing.T, open Opener) {
	l := openNew(t, open)
	c := mustAppend(t, l, req("order", "o-1", 0, eventlog.Event{Type: "Nil"}, ev("Empty", ""), ev("Null", "null")))
	for _, cs := range [][]eventlog.Commit{{c}, mustRead(t, l, 1, 1)} {
		for i, e := range cs[0].Events {
			if string(e.Payload) != "null" {
				t.Errorf("event %d (%s): payload %q, want null", i, e.Type, e.Payload)
			}
		}
	}
}

func testTime(t *testing.T, open Opener) {
	l := openNew(t, open)
	before := time.Now()
	c := mustAppend(t, l, req("order", "o-1", 0))
	after := time.Now()
	if c.Time.Before(before.Add(-time.Second)) || c.Time.After(after.Add(time.Second)) {
		t.Fatalf("zero Time stored as %v, want about now (%v)", c.Time, before)
	}
	zone := time.FixedZone("X", 5*3600)
	at := time.Date(1969, 7, 20, 20, 17, 40, 123456789, zone) // before the Unix epoch, not UTC
	r := req("order", "o-1", 1)
	r.Time = at
	mustAppend(t, l, r)
	read := mustRead(t, l, 1, 2)
	if len(read) != 2 || !read[0].Time.Equal(c.Time) || !read[1].Time.Equal(at) {
		t.Fatalf("times read back: %v, want %v and %v", read, c.Time, at)
	}
}
