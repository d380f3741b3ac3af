// Package logtest is the contract test suite of eventlog.Log: every
// implementation (eventlog's Badger and eventlog/jetstream) runs it to show
// it behaves the same.
package logtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/eventlog"
)

// Opener opens the log kept at name. The suite passes a fresh t.TempDir()
// for each test; opening the same name again after Close must give back the
// same log, with everything in it. A backend that keeps no files may use name
// as the name of its stream. The suite closes every log it opens.
type Opener func(t *testing.T, name string) eventlog.Log

// Run runs the whole contract suite against the logs open returns.
func Run(t *testing.T, open Opener) {
	tests := []struct {
		name string
		fn   func(t *testing.T, open Opener)
	}{
		{"RoundTrip", testRoundTrip},
		{"Traceparent", testTraceparent},
		{"Versions", testVersions},
		{"Conflict", testConflict},
		{"AnyVersion", testAnyVersion},
		{"Invalid", testInvalid},
		{"EmptyPayloadIsNull", testEmptyPayload},
		{"Time", testTime},
		{"Read", testRead},
		{"ReadAggregate", testReadAggregate},
		{"HeadAndVersionOfEmpty", testEmpty},
		{"NamesDoNotCollide", testNames},
		{"Wait", testWait},
		{"Closed", testClosed},
		{"Reopen", testReopen},
		{"ConcurrentAppends", testConcurrent},
		{"ConcurrentConflicts", testConcurrentConflicts},
		{"CanceledContext", testCanceled},
		{"AppendMany", testAppendMany},
		{"AppendManyConcurrent", testAppendManyConcurrent},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, open)
		})
	}
}

// openNew opens a fresh log that is closed when the test ends.
func openNew(t *testing.T, open Opener) eventlog.Log {
	t.Helper()
	return openAt(t, open, t.TempDir())
}

func openAt(t *testing.T, open Opener, name string) eventlog.Log {
	t.Helper()
	l := open(t, name)
	t.Cleanup(func() {
		if err := l.Close(context.Background()); err != nil && !errors.Is(err, eventlog.ErrClosed) {
			t.Errorf("close: %v", err)
		}
	})
	return l
}

func ev(typ, payload string) eventlog.Event {
	return eventlog.Event{Type: typ, Payload: []byte(payload)}
}

func req(aggType, id string, expected int64, events ...eventlog.Event) eventlog.AppendRequest {
	if len(events) == 0 {
		events = []eventlog.Event{ev("Happened", `{}`)}
	}
	return eventlog.AppendRequest{AggregateType: aggType, AggregateID: id, ExpectedVersion: expected, Events: events}
}

func mustAppend(t *testing.T, l eventlog.Log, r eventlog.AppendRequest) eventlog.Commit {
	t.Helper()
	c, err := l.Append(context.Background(), r)
	if err != nil {
		t.Fatalf("append %s/%s: %v", r.AggregateType, r.AggregateID, err)
	}
	return c
}

func mustRead(t *testing.T, l eventlog.Log, from uint64, limit int) []eventlog.Commit {
	t.Helper()
	cs, err := l.Read(context.Background(), from, limit)
	if err != nil {
		t.Fatalf("read from %d: %v", from, err)
	}
	return cs
}

func mustHead(t *testing.T, l eventlog.Log) uint64 {
	t.Helper()
	h, err := l.Head(context.Background())
	if err != nil {
		t.Fatalf("head: %v", err)
	}
	return h
}

func mustVersion(t *testing.T, l eventlog.Log, aggType, id string) uint64 {
	t.Helper()
	v, err := l.Version(context.Background(), aggType, id)
	if err != nil {
		t.Fatalf("version %s/%s: %v", aggType, id, err)
	}
	return v
}

// positions lists the positions of cs.
func positions(cs []eventlog.Commit) []uint64 {
	ps := make([]uint64, len(cs))
	for i, c := range cs {
		ps[i] = c.Position
	}
	return ps
}

func versions(cs []eventlog.Commit) []uint64 {
	vs := make([]uint64, len(cs))
	for i, c := range cs {
		vs[i] = c.Version
	}
	return vs
}

func seq(from, to uint64) []uint64 {
	var s []uint64
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}

// sameCommit reports how a and b differ, "" if they do not.
func sameCommit(a, b eventlog.Commit) string {
	switch {
	case a.Position != b.Position:
		return fmt.Sprintf("position %d != %d", a.Position, b.Position)
	case a.AggregateType != b.AggregateType || a.AggregateID != b.AggregateID:
		return fmt.Sprintf("aggregate %q/%q != %q/%q", a.AggregateType, a.AggregateID, b.AggregateType, b.AggregateID)
	case a.Version != b.Version:
		return fmt.Sprintf("version %d != %d", a.Version, b.Version)
	case a.OwnerID != b.OwnerID:
		return fmt.Sprintf("owner %q != %q", a.OwnerID, b.OwnerID)
	case a.Traceparent != b.Traceparent:
		return fmt.Sprintf("traceparent %q != %q", a.Traceparent, b.Traceparent)
	case !a.Time.Equal(b.Time):
		return fmt.Sprintf("time %v != %v", a.Time, b.Time)
	case len(a.Events) != len(b.Events):
		return fmt.Sprintf("%d events != %d", len(a.Events), len(b.Events))
	}
	for i := range a.Events {
		if a.Events[i].Type != b.Events[i].Type || string(a.Events[i].Payload) != string(b.Events[i].Payload) {
			return fmt.Sprintf("event %d: %s %s != %s %s", i, a.Events[i].Type, a.Events[i].Payload, b.Events[i].Type, b.Events[i].Payload)
		}
	}
	return ""
}

func equalU64(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func errContains(err error, parts ...string) bool {
	if err == nil {
		return false
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			return false
		}
	}
	return true
}

// waitResult runs Wait in a goroutine and returns the channel of its result.
func waitResult(ctx context.Context, l eventlog.Log, after uint64) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- l.Wait(ctx, after) }()
	return ch
}

// expectBlocked fails if ch delivers within a short while.
func expectBlocked(t *testing.T, ch <-chan error) {
	t.Helper()
	select {
	case err := <-ch:
		t.Fatalf("Wait returned %v, want it to block", err)
	case <-time.After(50 * time.Millisecond):
	}
}

// expectResult fails unless ch delivers within a generous while.
func expectResult(t *testing.T, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not return")
		return nil
	}
}
