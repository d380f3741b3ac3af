package ledger

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

// TestResolvedRecordIsTheRecordWithItsSeq: the resolved record
// DeleteParked keeps (its JSON written from the record's, not encoded
// again) reads back as the record, with its Seq and, as ResolvedAt, the
// time of its last history entry or, with no history, its last failure.
func TestResolvedRecordIsTheRecordWithItsSeq(t *testing.T) {
	s, err := Open("", Options{InMemory: true, MemTableSize: 4 << 20, BlockCacheSize: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(t.Context())
	at := time.Date(2026, 12, 6, 13, 0, 0, 123456789, time.UTC)
	full := &Record{Subscription: "sub", AggregateType: "order", AggregateID: "o-1", Version: 7, Index: 2, Position: 99,
		Error:    ErrorInfo{Classes: []string{"Timeout"}, Message: "deadline \"quoted\"", Module: "m@1"},
		Attempts: 5, FirstFailure: at.Add(-time.Hour), LastFailure: at.Add(-time.Minute), State: StateResuming,
		History:       []Entry{{Time: at.Add(-time.Hour), Action: "parked"}, {Time: at, Action: "resume", Actor: "ops", Reason: "fixed"}},
		InvocationKey: "k", Traceparent: "00-abc"}
	bare := &Record{Subscription: "sub", AggregateType: "order", AggregateID: "o-2", State: StateWaiting, LastFailure: at.Add(time.Second)}
	want := []*Resolved{{Record: *full, Seq: 1, ResolvedAt: at}, {Record: *bare, Seq: 2, ResolvedAt: at.Add(time.Second)}}
	for _, r := range []*Record{full, bare} {
		if err := s.Update(t.Context(), func(tx Tx) error {
			return errors.Join(tx.PutParked(r), tx.DeleteParked(r.Subscription, r.AggregateType, r.AggregateID))
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.View(t.Context(), func(tx Tx) error {
		got, _, err := tx.ListResolved(ResolvedFilter{Subscription: "sub"})
		if err != nil {
			return err
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("resolved records:\n got %+v\nwant %+v", got, want)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
