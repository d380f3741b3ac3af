package eventlog_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/berthhq/berth/eventlog"
)

// TestReadCommitsAreTheirOwn checks that the commits a read returns keep
// their values after the read's transaction has ended and Badger has reused
// its buffers (more reads over the same keys, more appends, a payload
// changed in place by its consumer): decodeItem copies each stored value
// once, and the commit's strings and payloads are views of that copy only.
func TestReadCommitsAreTheirOwn(t *testing.T) {
	ctx := context.Background()
	l, err := eventlog.Open(t.TempDir(), eventlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(ctx)
	const n = 300 // more than one read batch of Badger's iterator
	payload := func(i int) string { return fmt.Sprintf(`{"i":%d,"pad":"%0*d"}`, i, i%50, 0) }
	for i := range n {
		if _, err := l.Append(ctx, eventlog.AppendRequest{
			AggregateType: fmt.Sprintf("T%d", i%3), AggregateID: fmt.Sprintf("a-%d", i), OwnerID: fmt.Sprintf("o-%d", i),
			Events: []eventlog.Event{{Type: fmt.Sprintf("E%d", i), Payload: []byte(payload(i))}, {Type: "Second", Payload: []byte("{}")}},
		}); err != nil {
			t.Fatal(err)
		}
	}
	first, err := l.Read(ctx, 1, n)
	if err != nil || len(first) != n {
		t.Fatalf("read %d commits, %v", len(first), err)
	}
	byAgg, err := l.ReadAggregate(ctx, "T0", "a-0", 0, 0)
	if err != nil || len(byAgg) != 1 {
		t.Fatalf("ReadAggregate: %d commits, %v", len(byAgg), err)
	}
	// Churn: read everything again, append more, and scribble over one
	// commit's payload as a careless consumer might.
	for range 3 {
		if _, err := l.Read(ctx, 1, n); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 50 {
		if _, err := l.Append(ctx, eventlog.AppendRequest{AggregateType: "X", AggregateID: fmt.Sprintf("x-%d", i),
			Events: []eventlog.Event{{Type: "Overwrite", Payload: []byte(`"zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"`)}}}); err != nil {
			t.Fatal(err)
		}
	}
	scribbled := first[7].Events[0].Payload
	for i := range scribbled {
		scribbled[i] = '#'
	}
	_ = append(first[8].Events[0].Payload, "tail"...) // capacity-limited: must not write into the next field
	for i, c := range first {
		want := fmt.Sprintf("%d T%d a-%d o-%d E%d", i+1, i%3, i, i, i)
		got := fmt.Sprintf("%d %s %s %s %s", c.Position, c.AggregateType, c.AggregateID, c.OwnerID, c.Events[0].Type)
		if got != want || len(c.Events) != 2 || c.Events[1].Type != "Second" || string(c.Events[1].Payload) != "{}" {
			t.Fatalf("commit %d = %q (events %+v), want %q", i+1, got, c.Events, want)
		}
		if i != 7 && string(c.Events[0].Payload) != payload(i) {
			t.Fatalf("commit %d payload %q, want %q", i+1, c.Events[0].Payload, payload(i))
		}
	}
	if c := byAgg[0]; c.AggregateID != "a-0" || string(c.Events[0].Payload) != payload(0) {
		t.Fatalf("ReadAggregate's commit changed: %+v", c)
	}
}
