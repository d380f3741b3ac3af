package subscription

import (
	"context"
	"strconv"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/retry"
)

// The attributes of the spans, after OpenTelemetry's messaging semantic
// conventions where they have one, under berth. where they do not.
const (
	attrSystem      = "messaging.system"
	attrGroup       = "messaging.consumer.group.name"
	attrDestination = "messaging.destination.name"
	attrPartition   = "messaging.destination.partition.id"
	attrMessageID   = "messaging.message.id"
	attrOpName      = "messaging.operation.name"
	attrOpType      = "messaging.operation.type"
	attrErrorType   = "error.type"
	attrAttempt     = "berth.attempt"
	attrOutcome     = "berth.outcome"
	attrKind        = "berth.failure.kind"
	attrAggregate   = "berth.aggregate.id"
	attrVersion     = "berth.aggregate.version"
	attrEventType   = "berth.event.type"
	attrLink        = "berth.link"
	attrRetry       = "berth.long_horizon_retry"
)

// The values of berth.outcome on an attempt's span.
const (
	spanSuccess  = "success"
	spanRetried  = "retried"  // failed, and another attempt follows
	spanParked   = "parked"   // failed, and the aggregate waits: the span is an error
	spanCanceled = "canceled" // the run stopped mid-attempt; nothing was counted
)

// maxLinkKeys bounds the span contexts kept for links: one per event whose
// last attempt failed, dropped once it succeeds. Past the bound a later
// attempt has no link; the attempts themselves are still traced.
const maxLinkKeys = 100_000

// tracing makes the engine's spans and remembers, by invocation key, the
// last attempt at each event that has not yet succeeded, so that the next
// attempt (a retry, a long-horizon retry, an operator's resume) links to
// it. A park keeps the last attempt's traceparent in its ledger record, so
// a long-horizon retry or a resume after a restart (or on another host)
// links to it too; the retries within budget before a park are linked in
// this process only.
type tracing struct {
	tr      trace.Tracer
	enabled bool
	mu      sync.Mutex
	last    map[string]prevAttempt
	// off is every delivery's trace while tracing is off: it holds no
	// state, so a delivery allocates nothing for tracing.
	off deliveryTrace
}

type prevAttempt struct {
	sc      trace.SpanContext
	resumed string // the actor that resumed the event, "" when none did
}

func newTracing(tr trace.Tracer) *tracing {
	t := &tracing{tr: tr, enabled: tr != nil, last: map[string]prevAttempt{}}
	if tr == nil {
		t.tr = noop.NewTracerProvider().Tracer("")
	}
	t.off.t = t
	return t
}

// resumed notes that an operator resumed the event of key, so that its next
// attempt's link says so.
func (t *tracing) resumed(key, actor string) {
	if !t.enabled {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if p, ok := t.last[key]; ok {
		p.resumed = actor
		t.last[key] = p
	}
}

// traceparent returns the W3C traceparent of the last attempt at the event
// of key, for its ledger record; "" when there is none.
func (t *tracing) traceparent(key string) string {
	p, ok := t.previous(key)
	if !ok {
		return ""
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(trace.ContextWithSpanContext(context.Background(), p.sc), c)
	return c["traceparent"]
}

// restore remembers the attempt a ledger record names (Record.Traceparent)
// as the last at the event of key, unless this process knows a later one:
// so an attempt after a restart, or on another host, links to it too.
func (t *tracing) restore(key, traceparent string) {
	if !t.enabled || traceparent == "" {
		return
	}
	if _, ok := t.previous(key); ok {
		return
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": traceparent})
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		t.remember(key, sc)
	}
}

func (t *tracing) remember(key string, sc trace.SpanContext) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.last[key]; ok || len(t.last) < maxLinkKeys {
		t.last[key] = prevAttempt{sc: sc}
	}
}

func (t *tracing) forget(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.last, key)
}

func (t *tracing) previous(key string) (prevAttempt, bool) {
	if !t.enabled {
		return prevAttempt{}, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	p, ok := t.last[key]
	return p, ok
}

// deliveryTrace is one delivered event's parent span and the span of its
// attempt under way.
type deliveryTrace struct {
	t      *tracing
	parent trace.Span
	base   []attribute.KeyValue
	key    string
	long   bool // a long-horizon retry's delivery
	cur    trace.Span
	failed bool // the current attempt failed
}

// deliver starts the parent span of one delivered event of c.
func (t *tracing) deliver(ctx context.Context, sub string, partition int, c eventlog.Commit, idx int, key string, long bool) *deliveryTrace {
	if !t.enabled {
		return &t.off
	}
	d := &deliveryTrace{t: t, key: key, long: long}
	d.base = []attribute.KeyValue{
		attribute.String(attrSystem, "berth"),
		attribute.String(attrGroup, sub),
		attribute.String(attrDestination, c.AggregateType),
		attribute.String(attrPartition, strconv.Itoa(partition)),
		attribute.String(attrMessageID, key),
		attribute.String(attrAggregate, c.AggregateID),
		attribute.Int64(attrVersion, int64(c.Version)),
	}
	if idx >= 0 && idx < len(c.Events) {
		d.base = append(d.base, attribute.String(attrEventType, c.Events[idx].Type))
	}
	attrs := append([]attribute.KeyValue{attribute.String(attrOpName, "deliver"), attribute.String(attrOpType, "receive"),
		attribute.Bool(attrRetry, long)}, d.base...)
	if c.Traceparent != "" {
		// The append's own trace, kept with the commit: the delivery
		// continues it.
		ctx = propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": c.Traceparent})
	}
	_, d.parent = t.tr.Start(ctx, "deliver "+c.AggregateType, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attrs...))
	return d
}

// attempt ends the previous attempt's span as retried and starts the span
// of attempt n, linked to the previous attempt at the same event; the
// context returned, ctx's child, carries it to the invoker (and so the
// traceparent of the handler's outbound calls). Tracing off, it is ctx.
func (d *deliveryTrace) attempt(ctx context.Context, n int) context.Context {
	if !d.t.enabled {
		return ctx
	}
	d.endAttempt(spanRetried)
	var opts []trace.SpanStartOption
	if p, ok := d.t.previous(d.key); ok {
		why := "retry"
		switch {
		case p.resumed != "":
			why = "resume"
		case d.long:
			why = "long-horizon retry"
		}
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: p.sc, Attributes: []attribute.KeyValue{attribute.String(attrLink, why)}}))
	}
	attrs := append([]attribute.KeyValue{attribute.String(attrOpName, "process"), attribute.String(attrOpType, "process"),
		attribute.Int(attrAttempt, n)}, d.base...)
	opts = append(opts, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attrs...))
	ctx, d.cur = d.t.tr.Start(trace.ContextWithSpan(ctx, d.parent), "process "+d.base[2].Value.AsString(), opts...)
	d.failed = false
	d.t.remember(d.key, d.cur.SpanContext())
	return ctx
}

// event names the delivered event's type on the spans, for a delivery
// whose commit was read after its spans began (a long-horizon retry's).
func (d *deliveryTrace) event(typ string) {
	if !d.t.enabled {
		return
	}
	d.parent.SetAttributes(attribute.String(attrEventType, typ))
	d.base = append(d.base, attribute.String(attrEventType, typ)) // for the attempt spans begun after
	if d.cur != nil {
		d.cur.SetAttributes(attribute.String(attrEventType, typ))
	}
}

// fail records the current attempt's failure as an event on its span (and
// its class as error.type): whether it is an error is the outcome's to say.
func (d *deliveryTrace) fail(f *retry.Failure, dec retry.Decision) {
	if d.cur == nil || f == nil {
		return
	}
	info := errorInfo(f, dec)
	class := info.Kind
	if len(info.Classes) > 0 {
		class = info.Classes[0]
	}
	d.failed = true
	d.cur.SetAttributes(attribute.String(attrErrorType, class), attribute.String(attrKind, info.Kind))
	d.cur.AddEvent("attempt failed", trace.WithAttributes(attribute.String(attrErrorType, class),
		attribute.String(attrKind, info.Kind), attribute.String("exception.message", info.Message)))
}

// end ends the spans with the delivery's outcome: only a park marks the
// attempt's span (and the delivery's) an error.
func (d *deliveryTrace) end(o outcome) {
	if !d.t.enabled {
		return
	}
	result := spanCanceled
	switch {
	case o == outcomeHandled:
		result = spanSuccess
		d.t.forget(d.key)
	case o == outcomeParked:
		result = spanParked
		if d.cur != nil {
			d.cur.SetStatus(codes.Error, "parked")
		}
		d.parent.SetStatus(codes.Error, "parked")
	case d.failed:
		result = spanRetried
	}
	d.endAttempt(result)
	d.parent.SetAttributes(attribute.String(attrOutcome, result))
	d.parent.End()
}

func (d *deliveryTrace) endAttempt(result string) {
	if d.cur == nil {
		return
	}
	d.cur.SetAttributes(attribute.String(attrOutcome, result))
	d.cur.End()
	d.cur = nil
}
