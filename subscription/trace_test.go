package subscription

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/berthhq/berth/internal/clock"
	"github.com/berthhq/berth/internal/testing/otlptest"
	berthtracing "github.com/berthhq/berth/internal/tracing"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/retry"
)

// spanSeer is a handler that notes the span its context carries, the one
// whose traceparent its outbound calls send.
type spanSeer struct {
	*recorder
	mu   sync.Mutex
	seen map[string][]trace.SpanContext // by aggregate id
}

func (s *spanSeer) Invoke(ctx context.Context, d Delivery) *retry.Failure {
	s.mu.Lock()
	s.seen[d.Commit.AggregateID] = append(s.seen[d.Commit.AggregateID], trace.SpanContextFromContext(ctx))
	s.mu.Unlock()
	return s.recorder.Invoke(ctx, d)
}

// The engine's spans reach a real OTLP/HTTP receiver: a deliver span per
// event with a process span per attempt under it, after the messaging
// conventions; a retried failure is an event, not an error; the park is the
// error; the retry, the long-horizon retry and the operator's resume each
// link to the attempt before; the handler's context carries its attempt's
// span.
func TestSpansReachAnOTLPReceiver(t *testing.T) {
	recv, tr := tracerFor(t)
	clk := clock.NewFake(t0)
	var broken atomic.Bool
	broken.Store(true)
	h := &spanSeer{seen: map[string][]trace.SpanContext{}, recorder: newRecorder(clk, func(d Delivery, n int) *retry.Failure {
		switch {
		case d.Commit.AggregateID == "r" && n == 1:
			return &retry.Failure{Classes: []string{"Flaky"}, Message: "try again"}
		case d.Commit.AggregateID == "p" && broken.Load():
			return &retry.Failure{Classes: []string{"Bug"}, Message: "bad data"}
		}
		return nil
	})}
	e := newEnv(t, Options{Tracer: tr}, brokenSpec(h))
	e.clock = clk
	e.start()
	e.append("Order", "r")
	e.advance() // the retry's backoff
	h.waitHandled(t, "r", 1)
	e.append("Order", "p")
	e.waitRecord(sub, "Order", "p", func(*ledger.Record) bool { return true })
	if d := e.advance(); d != 3*time.Minute {
		t.Fatalf("long-horizon retry after %v", d)
	}
	e.waitRecord(sub, "Order", "p", func(r *ledger.Record) bool { return r.ParkedRetries == 1 })
	broken.Store(false)
	resumeAndFlush(t, e, h.recorder, tr)
	process := func(agg string) func([]*tracepb.Span) []*tracepb.Span {
		return func(spans []*tracepb.Span) []*tracepb.Span {
			var out []*tracepb.Span
			for _, s := range spans {
				if s.Name == "process Order" && otlptest.Attr(s, attrAggregate) == agg {
					out = append(out, s)
				}
			}
			return out
		}
	}
	spans := recv.WaitFor(t, "3 attempts at p", func(s []*tracepb.Span) bool { return len(process("p")(s)) == 3 })
	byID := map[string]*tracepb.Span{}
	for _, s := range spans {
		byID[otlptest.ID(s.SpanId)] = s
	}

	r := process("r")(spans)
	if len(r) != 2 {
		t.Fatalf("attempts at r:\n%s", otlptest.Dump(spans))
	}
	for i, s := range r {
		for k, want := range map[string]string{attrSystem: "berth", attrGroup: sub, attrDestination: "Order",
			attrMessageID: sub + ":Order/r@1:0", attrOpName: "process", attrAttempt: []string{"1", "2"}[i]} {
			if got := otlptest.Attr(s, k); got != want {
				t.Errorf("attempt %d: %s = %q, want %q", i+1, k, got, want)
			}
		}
		if s.Kind != tracepb.Span_SPAN_KIND_CONSUMER || otlptest.Attr(s, attrPartition) == "" {
			t.Errorf("attempt %d: kind %v, partition %q", i+1, s.Kind, otlptest.Attr(s, attrPartition))
		}
		if parent := byID[otlptest.ID(s.ParentSpanId)]; parent == nil || parent.Name != "deliver Order" || otlptest.Attr(parent, attrOutcome) != spanSuccess {
			t.Errorf("attempt %d's parent %v", i+1, parent)
		}
	}
	if s := r[0]; otlptest.Attr(s, attrOutcome) != spanRetried || otlptest.Attr(s, attrErrorType) != "Flaky" ||
		s.Status.GetCode() == tracepb.Status_STATUS_CODE_ERROR || len(s.Events) != 1 || s.Events[0].Name != "attempt failed" {
		t.Errorf("retried attempt: %s", otlptest.Dump([]*tracepb.Span{s}))
	}
	if s := r[1]; otlptest.Attr(s, attrOutcome) != spanSuccess || !linksTo(s, r[0], "retry") || !slices.Equal(r[0].ParentSpanId, s.ParentSpanId) {
		t.Errorf("retry: %s", otlptest.Dump([]*tracepb.Span{s}))
	}

	p := process("p")(spans)
	if s := p[0]; otlptest.Attr(s, attrOutcome) != spanParked || s.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || otlptest.Attr(s, attrErrorType) != "Bug" {
		t.Errorf("parking attempt: %s", otlptest.Dump([]*tracepb.Span{s}))
	}
	if s := p[1]; otlptest.Attr(s, attrEventType) != "OrderShipped" || otlptest.Attr(s, attrOutcome) != spanRetried || s.Status.GetCode() == tracepb.Status_STATUS_CODE_ERROR || !linksTo(s, p[0], "long-horizon retry") {
		t.Errorf("long-horizon retry: %s", otlptest.Dump([]*tracepb.Span{s}))
	}
	if s := p[2]; otlptest.Attr(s, attrOutcome) != spanSuccess || !linksTo(s, p[1], "resume") {
		t.Errorf("resumed attempt: %s", otlptest.Dump([]*tracepb.Span{s}))
	}
	// The handler ran inside each attempt's span.
	for agg, want := range map[string][]*tracepb.Span{"r": r, "p": p} {
		h.mu.Lock()
		seen := h.seen[agg]
		h.mu.Unlock()
		if len(seen) != len(want) {
			t.Fatalf("%s: handler saw %d spans, want %d", agg, len(seen), len(want))
		}
		for i, sc := range seen {
			if sc.SpanID().String() != otlptest.ID(want[i].SpanId) || sc.TraceID().String() != otlptest.ID(want[i].TraceId) {
				t.Errorf("%s attempt %d: handler's span %s, exported %s", agg, i+1, sc.SpanID(), otlptest.ID(want[i].SpanId))
			}
		}
	}
}

func linksTo(s, prev *tracepb.Span, why string) bool {
	for _, l := range s.Links {
		if slices.Equal(l.SpanId, prev.SpanId) && slices.Equal(l.TraceId, prev.TraceId) && otlptest.AttrOf(l.Attributes, attrLink) == why {
			return true
		}
	}
	return false
}

// A park keeps its attempt's traceparent in the ledger record: after a
// restart (a new engine, nothing in memory) the long-horizon retry and then
// the operator's resume still link to the attempt before.
func TestLinksSurviveARestart(t *testing.T) {
	recv, tr := tracerFor(t)
	clk := clock.NewFake(t0)
	var broken atomic.Bool
	broken.Store(true)
	rec := brokenFor(clk, &broken, "p")
	e := newEnv(t, Options{Tracer: tr}, brokenSpec(rec))
	e.clock = clk
	e.start()
	e.append("Order", "p")
	if r := e.waitRecord(sub, "Order", "p", func(*ledger.Record) bool { return true }); r.Traceparent == "" {
		t.Fatalf("the park kept no traceparent: %+v", r)
	}
	e.restart()
	e.advance()
	e.waitRecord(sub, "Order", "p", func(r *ledger.Record) bool { return r.ParkedRetries == 1 })
	e.restart()
	broken.Store(false)
	resumeAndFlush(t, e, rec, tr)
	var p []*tracepb.Span
	recv.WaitFor(t, "3 attempts at p", func(spans []*tracepb.Span) bool {
		p = p[:0]
		for _, s := range spans {
			if s.Name == "process Order" {
				p = append(p, s)
			}
		}
		return len(p) == 3
	})
	if !linksTo(p[1], p[0], "long-horizon retry") || !linksTo(p[2], p[1], "resume") {
		t.Errorf("attempts across restarts are not linked:\n%s", otlptest.Dump(p))
	}
}

// tracerFor is a tracer sending to a fresh OTLP receiver, closed at the
// test's end.
func tracerFor(t *testing.T) (*otlptest.Receiver, *berthtracing.Tracer) {
	recv := otlptest.New(t)
	tr, err := berthtracing.Open(berthtracing.Settings{Endpoint: recv.URL, SampleRatio: 1, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close(context.Background()) })
	return recv, tr
}

// resumeAndFlush resumes the parked aggregate p as alice, waits until its
// event is handled and sends the spans so far.
func resumeAndFlush(t *testing.T, e *env, rec *recorder, tr *berthtracing.Tracer) {
	t.Helper()
	if err := e.eng.Resume(context.Background(), sub, "Order", "p", Caller{Actor: "alice", Reason: "fixed"}); err != nil {
		t.Fatal(err)
	}
	rec.waitHandled(t, "p", 1)
	e.waitIdle(sub)
	if err := tr.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}
