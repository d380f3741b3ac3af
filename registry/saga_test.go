package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/berthhq/berth/retry"
	"github.com/berthhq/berth/wasm/abi"
)

// TestGatewayAnswers classifies each kind of answer of a command gateway,
// and checks the request the host sends.
func TestGatewayAnswers(t *testing.T) {
	refused := func() string { // an address nothing listens on
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		return "http://" + addr + "/commands"
	}()
	tests := []struct {
		name        string
		status      int
		header      []string // name, value, …
		body        string
		block       bool   // the gateway never answers (the request times out)
		url         string // instead of the test server
		wantReject  bool
		wantReason  string
		wantClass   string // the failure's class; "" for none
		wantAs      retry.Class
		wantAfter   time.Duration
		wantMessage string
	}{
		{name: "200 accepts", status: 200},
		{name: "202 accepts", status: 202, body: `{"id":1}`},
		{name: "409 problem rejects with its detail", status: 409, header: []string{"Content-Type", "application/problem+json"},
			body: `{"type":"about:blank","title":"Conflict","detail":"out of stock"}`, wantReject: true, wantReason: "out of stock"},
		{name: "422 text rejects with the body", status: 422, header: []string{"Content-Type", "text/plain"}, body: " no such item\n",
			wantReject: true, wantReason: "no such item"},
		{name: "409 JSON without detail gives the title", status: 409, header: []string{"Content-Type", "application/json"},
			body: `{"title":"Taken"}`, wantReject: true, wantReason: "Taken"},
		{name: "409 without a body gives the status text", status: 409, wantReject: true, wantReason: "Conflict"},
		{name: "a long reason is cut", status: 409, body: strings.Repeat("é", 2000), wantReject: true,
			wantReason: strings.Repeat("é", maxReason/2) + "…"},
		{name: "429 is backpressure with Retry-After", status: 429, header: []string{"Retry-After", "7"},
			wantClass: retry.ClassCommandGateway, wantAs: retry.Backpressure, wantAfter: 7 * time.Second, wantMessage: "busy"},
		{name: "429 with a huge Retry-After waits at most MaxRetryAfter", status: 429, header: []string{"Retry-After", "99999999999999999999"},
			wantClass: retry.ClassCommandGateway, wantAs: retry.Backpressure, wantAfter: retry.MaxRetryAfter, wantMessage: "busy"},
		{name: "429 with a far-future Retry-After date waits at most MaxRetryAfter", status: 429, header: []string{"Retry-After", "Fri, 31 Dec 9999 23:59:59 GMT"},
			wantClass: retry.ClassCommandGateway, wantAs: retry.Backpressure, wantAfter: retry.MaxRetryAfter, wantMessage: "busy"},
		{name: "429 with a negative Retry-After has no floor", status: 429, header: []string{"Retry-After", "-30"},
			wantClass: retry.ClassCommandGateway, wantAs: retry.Backpressure, wantMessage: "busy"},
		{name: "429 without Retry-After is backpressure", status: 429,
			wantClass: retry.ClassCommandGateway, wantAs: retry.Backpressure, wantMessage: "busy"},
		{name: "500 is recoverable", status: 500, body: "db down",
			wantClass: retry.ClassCommandGateway, wantAs: retry.Recoverable, wantMessage: "the gateway answered 500: db down"},
		{name: "503 is recoverable", status: 503, header: []string{"Retry-After", "3"},
			wantClass: retry.ClassCommandGateway, wantAs: retry.Recoverable, wantMessage: "answered 503"},
		{name: "400 is recoverable", status: 400, header: []string{"Content-Type", "application/problem+json"}, body: `{"detail":"bad json"}`,
			wantClass: retry.ClassCommandGateway, wantAs: retry.Recoverable, wantMessage: "answered 400: bad json"},
		{name: "a redirect is not followed", status: 302, header: []string{"Location", "/elsewhere"},
			wantClass: retry.ClassCommandGateway, wantAs: retry.Recoverable, wantMessage: "answered 302"},
		{name: "a refused connection is systemic", url: refused,
			wantClass: retry.ClassConnectionRefused, wantAs: retry.Systemic, wantMessage: "connection refused"},
		{name: "no answer within the timeout is recoverable", block: true,
			wantClass: retry.ClassCommandGateway, wantAs: retry.Recoverable, wantMessage: "no answer within 50ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got struct {
				method, path, key, auth, contentType, traceparent string
				body                                              map[string]any
			}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				got.method, got.path, got.key = r.Method, r.URL.Path, r.Header.Get("Idempotency-Key")
				got.auth, got.contentType = r.Header.Get("Authorization"), r.Header.Get("Content-Type")
				got.traceparent = r.Header.Get("traceparent")
				json.Unmarshal(b, &got.body)
				if tt.block {
					<-r.Context().Done()
					return
				}
				for i := 0; i+1 < len(tt.header); i += 2 {
					w.Header().Set(tt.header[i], tt.header[i+1])
				}
				w.WriteHeader(tt.status)
				io.WriteString(w, tt.body)
			}))
			url := srv.URL + "/commands"
			if tt.url != "" {
				url = tt.url
			}
			s := sagaInvoker{client: &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
			gw := Gateway{AggregateType: "Stock", URL: url, Timeout: 50 * time.Millisecond,
				Headers: map[string]string{"Authorization": "Bearer t", "X-Tenant": "eu"}}
			cmd := abi.Command{AggregateType: "Stock", AggregateID: "sku-9", Type: "ReserveStock", Payload: []byte(`{"order":"o-1"}`)}
			a := s.post(attemptSpan(), gw, "S.h:o-1@1:0/0", &cmd)
			srv.Close() // waits for the handler: got is complete

			if a.rejected != tt.wantReject || a.reason != tt.wantReason || (tt.wantReject && a.status != tt.status) {
				t.Errorf("rejected %v %d %q, want %v %d %q", a.rejected, a.status, a.reason, tt.wantReject, tt.status, tt.wantReason)
			}
			switch {
			case tt.wantClass == "" && a.failure != nil:
				t.Errorf("failure %v, want none", a.failure)
			case tt.wantClass != "" && a.failure == nil:
				t.Errorf("no failure, want %s", tt.wantClass)
			case tt.wantClass != "":
				d := retry.Classify(a.failure, nil, nil)
				if a.failure.Classes[0] != tt.wantClass || d.Class != tt.wantAs || d.RetryAfter != tt.wantAfter ||
					!strings.Contains(a.failure.Message, tt.wantMessage) {
					t.Errorf("failure %+v classified %+v; want %s as %s after %v with %q", a.failure, d, tt.wantClass, tt.wantAs, tt.wantAfter, tt.wantMessage)
				}
			}
			if tt.url != "" {
				return
			}
			want := map[string]any{"requestId": "S.h:o-1@1:0/0", "aggregateType": "Stock", "aggregateId": "sku-9",
				"type": "ReserveStock", "payload": map[string]any{"order": "o-1"}}
			if got.method != "POST" || got.path != "/commands" || got.key != "S.h:o-1@1:0/0" || got.auth != "Bearer t" ||
				got.contentType != "application/json" || !sameJSON(got.body, want) || got.traceparent != attemptTraceparent {
				t.Errorf("request %+v", got)
			}
		})
	}
}

func sameJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// attemptTraceparent is the traceparent of attemptSpan's span: a command
// carries its attempt's, so that the gateway's trace joins the delivery's.
const attemptTraceparent = "00-0102030405060708090a0b0c0d0e0f10-1112131415161718-01"

// attemptSpan is a context carrying a sampled span, as an attempt's does
// when tracing is on.
func attemptSpan() context.Context {
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		SpanID:     trace.SpanID{17, 18, 19, 20, 21, 22, 23, 24},
		TraceFlags: trace.FlagsSampled,
	})
	return trace.ContextWithSpanContext(context.Background(), sc)
}
