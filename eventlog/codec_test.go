package eventlog

import (
	"errors"
	"testing"
	"time"
)

func TestCodecRoundTrip(t *testing.T) {
	tests := []Commit{
		{Position: 1, AggregateType: "order", AggregateID: "o-1", Version: 1, Time: time.Unix(0, 0).UTC(),
			Events: []Event{{Type: "A", Payload: []byte(`{}`)}}},
		{Position: 1 << 50, AggregateType: "\x00\xff", AggregateID: "", Version: 1 << 60, OwnerID: "owner",
			Time:   time.Date(1, 1, 1, 0, 0, 0, 999999999, time.UTC),
			Events: []Event{{Type: "A", Payload: []byte(`1`)}, {Type: "B", Payload: []byte(`[1,2]`)}}},
	}
	for _, c := range tests {
		b := AppendCommit(nil, &c)
		if len(b) > EncodedSize(&c) {
			t.Fatalf("encoded %d bytes, bound %d", len(b), EncodedSize(&c))
		}
		got, err := DecodeCommit(c.Position, b)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if got.Version != c.Version || got.AggregateType != c.AggregateType || got.AggregateID != c.AggregateID ||
			got.OwnerID != c.OwnerID || !got.Time.Equal(c.Time) || len(got.Events) != len(c.Events) {
			t.Fatalf("round trip: got %+v, want %+v", got, c)
		}
		// Appending to a decoded payload must not clobber what follows it.
		_ = append(got.Events[0].Payload, 'x')
		if again, _ := DecodeCommit(c.Position, b); string(again.Events[0].Payload) != string(c.Events[0].Payload) {
			t.Fatal("appending to a decoded payload changed the buffer")
		}
		// Every truncation is reported as corrupt, never a panic.
		for n := range len(b) {
			if _, err := DecodeCommit(c.Position, b[:n]); !errors.Is(err, errCorrupt) {
				t.Fatalf("truncated to %d bytes: err = %v", n, err)
			}
		}
	}
}

func FuzzDecodeCommit(f *testing.F) {
	c := Commit{AggregateType: "a", AggregateID: "b", Version: 3, Events: []Event{{Type: "E", Payload: []byte("null")}}}
	f.Add(AppendCommit(nil, &c))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = DecodeCommit(1, b)
	})
}
