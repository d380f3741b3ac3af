// Package otlptest is a test kit: an OTLP/HTTP trace receiver, the
// collector's protocol (protobuf POSTs to /v1/traces) decoded with the OTLP
// protobuf types, so that a test reads the spans a real exporter sent.
package otlptest

import (
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Receiver is a running OTLP/HTTP receiver; URL is its base URL, the value
// of [tracing] otlp-endpoint.
type Receiver struct {
	URL   string
	mu    sync.Mutex
	spans []*tracepb.Span
	svc   []string // each span's resource service.name
}

// New starts a receiver on a free port, closed at the test's end.
func New(t testing.TB) *Receiver {
	r := &Receiver{}
	srv := httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		http.Error(w, "want POST /v1/traces", http.StatusNotFound)
		return
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		http.Error(w, "want application/x-protobuf, got "+ct, http.StatusUnsupportedMediaType)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var msg coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	for _, rs := range msg.ResourceSpans {
		svc := AttrOf(rs.GetResource().GetAttributes(), "service.name")
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				r.spans = append(r.spans, s)
				r.svc = append(r.svc, svc)
			}
		}
	}
	r.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

// Spans returns the spans received so far, in the order they came.
func (r *Receiver) Spans() []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*tracepb.Span(nil), r.spans...)
}

// Services returns the resource service.name of each span Spans returns.
func (r *Receiver) Services() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.svc...)
}

// WaitFor waits up to a minute until ok holds of the spans received,
// failing the test with what otherwise.
func (r *Receiver) WaitFor(t testing.TB, what string, ok func([]*tracepb.Span) bool) []*tracepb.Span {
	t.Helper()
	var spans []*tracepb.Span
	checkfor.Nil(t, time.Minute, 20*time.Millisecond, func() error {
		if spans = r.Spans(); !ok(spans) {
			return fmt.Errorf("no %s among the %d spans received:\n%s", what, len(spans), Dump(spans))
		}
		return nil
	})
	return spans
}

// Attr returns span's attribute key as a string ("" when absent).
func Attr(s *tracepb.Span, key string) string { return AttrOf(s.GetAttributes(), key) }

// AttrOf returns attribute key of attrs as a string ("" when absent).
func AttrOf(attrs []*commonpb.KeyValue, key string) string {
	for _, kv := range attrs {
		if kv.Key != key {
			continue
		}
		switch v := kv.Value.GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			return v.StringValue
		case *commonpb.AnyValue_IntValue:
			return fmt.Sprint(v.IntValue)
		case *commonpb.AnyValue_BoolValue:
			return fmt.Sprint(v.BoolValue)
		case *commonpb.AnyValue_DoubleValue:
			return fmt.Sprint(v.DoubleValue)
		}
		return kv.Value.String()
	}
	return ""
}

// ID returns a span or trace id as the hex a traceparent writes it in.
func ID(b []byte) string { return hex.EncodeToString(b) }

// Traceparent returns the W3C traceparent naming span.
func Traceparent(s *tracepb.Span) string {
	return fmt.Sprintf("00-%s-%s-01", ID(s.TraceId), ID(s.SpanId))
}

// Dump renders spans one a line, for a failing test's message.
func Dump(spans []*tracepb.Span) string {
	var out string
	for _, s := range spans {
		out += fmt.Sprintf("%s %s parent=%s status=%v attrs=%v links=%d events=%d\n",
			s.Name, ID(s.SpanId), ID(s.ParentSpanId), s.GetStatus().GetCode(), s.Attributes, len(s.Links), len(s.Events))
	}
	return out
}
