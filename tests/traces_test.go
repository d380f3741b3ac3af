package tests

import (
	"fmt"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"slices"
	"strings"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/berthhq/berth/internal/testing/otlptest"
)

// TestTracesReachTheCollectorAndTheService: the built host with [tracing]
// sends its spans to a real OTLP/HTTP receiver. A notification the service
// refuses once is two process spans under one deliver span, the retry
// linked to the first attempt, which is not an error but carries the
// failure as an event; each call reached the service with the traceparent
// of its own attempt, so the service's trace joins. An unknown buyer's park
// is the error. The traceparent sent with the append is kept with the
// commit, and the delivery's trace continues it.
func TestTracesReachTheCollectorAndTheService(t *testing.T) {
	recv := otlptest.New(t)
	svc := newNotifier(t)
	svc.set("flaky", behaviour{Fail: 1})
	svc.set("ghost", behaviour{Unknown: true})
	h := newHost(t, hostConfig{NotifyURL: svc.URL(), Extra: fastRetry + fmt.Sprintf("\n[tracing]\notlp-endpoint = %q\n", recv.URL)})
	h.uploadNotifier(t, 201)
	// The appender's own trace: the delivery continues it.
	const appenderTrace, appenderSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	h.must(201, "POST", "/v1/events", map[string]any{
		"aggregateType": "Order", "aggregateId": "o-1", "ownerId": "flaky",
		"events": []map[string]any{{"type": "OrderShipped", "data": map[string]string{"carrier": "DHL"}}},
	}, "traceparent", "00-"+appenderTrace+"-"+appenderSpan+"-01")
	h.appendShipped(t, "o-2", "ghost")
	svc.waitNotified(t, key("o-1", 1), 20*time.Second)
	h.waitParked(t, "o-2", 20*time.Second)
	// The service answered o-1's retry; the host has handled it once it
	// says so (a stop before would cut the attempt short).
	checkfor.Within(t, 20*time.Second, func() error {
		return reads("the host's log", h.Stderr(), "attempt succeeded after retries")
	})
	h.Stop() // a clean stop sends the spans still batched
	for _, want := range []string{"tracing on", "attempt succeeded after retries", "aggregate parked", "module uploaded"} {
		if !strings.Contains(h.Stderr(), want) {
			t.Errorf("the host's log lacks %q:\n%s", want, h.Stderr())
		}
	}

	attempts := func(order string, spans []*tracepb.Span) []*tracepb.Span {
		var out []*tracepb.Span
		for _, s := range spans {
			if s.Name == "process Order" && otlptest.Attr(s, "berth.aggregate.id") == order {
				out = append(out, s)
			}
		}
		return out
	}
	spans := recv.WaitFor(t, "the attempts at o-1 and o-2", func(s []*tracepb.Span) bool {
		return len(attempts("o-1", s)) == 2 && len(attempts("o-2", s)) == 1
	})
	for _, svcName := range recv.Services() {
		if svcName != "berth" {
			t.Errorf("a span of service %q", svcName)
		}
	}
	first, second := attempts("o-1", spans)[0], attempts("o-1", spans)[1]
	for i, s := range []*tracepb.Span{first, second} {
		for k, want := range map[string]string{"messaging.system": "berth", "messaging.consumer.group.name": subName,
			"messaging.destination.name": "Order", "messaging.message.id": key("o-1", 1), "berth.attempt": fmt.Sprint(i + 1)} {
			if got := otlptest.Attr(s, k); got != want {
				t.Errorf("attempt %d: %s = %q, want %q", i+1, k, got, want)
			}
		}
	}
	if otlptest.Attr(first, "berth.outcome") != "retried" || otlptest.Attr(first, "error.type") == "" ||
		first.Status.GetCode() == tracepb.Status_STATUS_CODE_ERROR || len(first.Events) != 1 {
		t.Errorf("the refused attempt: %s", otlptest.Dump([]*tracepb.Span{first}))
	}
	linked := slices.ContainsFunc(second.Links, func(l *tracepb.Span_Link) bool {
		return slices.Equal(l.SpanId, first.SpanId) && otlptest.AttrOf(l.Attributes, "berth.link") == "retry"
	})
	if otlptest.Attr(second, "berth.outcome") != "success" || !linked || !slices.Equal(first.ParentSpanId, second.ParentSpanId) {
		t.Errorf("the retry: %s", otlptest.Dump([]*tracepb.Span{second}))
	}
	calls := svc.callsOf("flaky")
	if len(calls) != 2 || calls[0].Traceparent != otlptest.Traceparent(first) || calls[1].Traceparent != otlptest.Traceparent(second) {
		t.Errorf("the service's calls %+v, want traceparents %s and %s", calls, otlptest.Traceparent(first), otlptest.Traceparent(second))
	}
	var deliver *tracepb.Span
	for _, s := range spans {
		if slices.Equal(s.SpanId, first.ParentSpanId) {
			deliver = s
		}
	}
	if deliver == nil || deliver.Name != "deliver Order" || otlptest.ID(deliver.TraceId) != appenderTrace ||
		otlptest.ID(deliver.ParentSpanId) != appenderSpan || otlptest.ID(first.TraceId) != appenderTrace {
		t.Errorf("the delivery does not continue the append's trace %s/%s:\n%s", appenderTrace, appenderSpan, otlptest.Dump(spans))
	}
	parked := attempts("o-2", spans)[0]
	if otlptest.Attr(parked, "berth.outcome") != "parked" || parked.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR {
		t.Errorf("the parking attempt: %s", otlptest.Dump([]*tracepb.Span{parked}))
	}
}
