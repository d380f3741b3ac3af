package berth

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/berthhq/berth/wasm/abi"
)

// deliver runs one event through the glue the way the host does: alloc,
// write the envelope, handle; it returns the decoded result.
func deliver(t testing.TB, g *glue, p *Processor, ev *abi.Event) abi.Result {
	t.Helper()
	env := abi.AppendEvent(nil, ev)
	in := g.alloc(uint32(len(env)))
	copy(in, env)
	res, err := abi.DecodeResult(g.handle(p, in, Ports{}))
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func glueEvent(handler string, i int) *abi.Event {
	id := fmt.Sprintf("o-%d", i)
	return &abi.Event{Handler: handler, InvocationKey: InvocationKey("P", handler, "Order", id, 1, 0), Attempt: 1,
		Type: "OrderPlaced", AggregateType: "Order", AggregateID: id, Version: 1, OwnerID: "buyer-7",
		Payload: []byte(fmt.Sprintf(`{"order":%q}`, id))}
}

// TestGlueNoopAllocatesNothing: an event for a handler that does nothing
// costs the module no allocation (the blocks its strings are kept in, one
// per 16 KiB of them, average out far below one per event).
func TestGlueNoopAllocatesNothing(t *testing.T) {
	p := (&Processor{Name: "P", Kind: Reactor}).On("noop", "OrderPlaced", func(*Context) error { return nil })
	var g glue
	env := abi.AppendEvent(nil, glueEvent("noop", 1))
	allocs := testing.AllocsPerRun(1000, func() {
		in := g.alloc(uint32(len(env)))
		copy(in, env)
		g.handle(p, in, Ports{})
	})
	if allocs != 0 {
		t.Errorf("a no-op event allocates %v times", allocs)
	}
}

// TestGlueKeepsWhatHandlersKeep: the strings a handler keeps, and the
// copies of the payload it makes, stay as they were however many events
// follow (the envelope buffer itself is reused for each of them).
func TestGlueKeepsWhatHandlersKeep(t *testing.T) {
	var keys, ids, owners, types, payloads []string
	p := (&Processor{Name: "P", Kind: Reactor}).On("keep", "OrderPlaced", func(c *Context) error {
		keys = append(keys, c.InvocationKey)
		ids = append(ids, c.Event.AggregateID)
		owners = append(owners, c.Event.OwnerID+"/"+c.Event.AggregateType)
		types = append(types, c.Event.Type)
		payloads = append(payloads, string(c.Event.Payload))
		return nil
	})
	var g glue
	const n = 2000 // several envelope blocks
	for i := range n {
		if res := deliver(t, &g, p, glueEvent("keep", i)); res.Status != abi.StatusOK {
			t.Fatalf("event %d: %+v", i, res.Failure)
		}
	}
	for i := range n {
		want := glueEvent("keep", i)
		got := []string{keys[i], ids[i], owners[i], types[i], payloads[i]}
		exp := []string{want.InvocationKey, want.AggregateID, want.OwnerID + "/" + want.AggregateType, want.Type, string(want.Payload)}
		if !slices.Equal(got, exp) {
			t.Fatalf("event %d: kept %q, want %q", i, got, exp)
		}
	}
}

func TestGlueReportsBadEnvelopesAndPanics(t *testing.T) {
	p := (&Processor{Name: "P", Kind: Reactor}).On("panics", "OrderPlaced", func(*Context) error { panic("kaboom") })
	var g glue
	tests := []struct {
		name     string
		p        *Processor
		envelope []byte
		class    string
		message  string
	}{
		{"truncated envelope", p, abi.AppendEvent(nil, glueEvent("panics", 1))[:5], ClassHost.Name(), "decode envelope"},
		{"no processor", nil, abi.AppendEvent(nil, glueEvent("panics", 1)), ClassHost.Name(), "no processor registered"},
		{"unknown handler", p, abi.AppendEvent(nil, glueEvent("missing", 1)), ClassHost.Name(), `no handler "missing"`},
		{"panic", p, abi.AppendEvent(nil, glueEvent("panics", 1)), ClassPanic.Name(), "panic: kaboom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := g.alloc(uint32(len(tt.envelope)))
			copy(in, tt.envelope)
			res, err := abi.DecodeResult(g.handle(tt.p, in, Ports{}))
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != abi.StatusFailed || res.Failure.Classes[0] != tt.class || !strings.Contains(res.Failure.Message, tt.message) {
				t.Fatalf("result %+v, want a failure of %s mentioning %q", res, tt.class, tt.message)
			}
		})
	}
}

// BenchmarkGlueNoop is the guest's own work for one no-op event, natively.
func BenchmarkGlueNoop(b *testing.B) {
	p := (&Processor{Name: "P", Kind: Reactor}).On("noop", "OrderPlaced", func(*Context) error { return nil })
	var g glue
	env := abi.AppendEvent(nil, glueEvent("noop", 1))
	b.ReportAllocs()
	for b.Loop() {
		in := g.alloc(uint32(len(env)))
		copy(in, env)
		g.handle(p, in, Ports{})
	}
}
