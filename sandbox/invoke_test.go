package sandbox

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/retry"
	"github.com/berthhq/berth/wasm/abi"
)

func shipped(order, buyer string, version uint64) *abi.Event {
	return &abi.Event{
		Handler:       "onOrderShipped",
		InvocationKey: "ShipmentNotifier.onOrderShipped:" + order + "@" + strconv.FormatUint(version, 10) + ":0",
		Attempt:       1,
		Type:          "OrderShipped",
		AggregateType: "Order",
		AggregateID:   order,
		Version:       version,
		OwnerID:       buyer,
		Payload:       []byte(`{"carrier":"DHL"}`),
	}
}

// notificationService records requests and answers with the scripted status.
type notificationService struct {
	mu       sync.Mutex
	status   int
	header   http.Header
	requests []*http.Request
	bodies   []string
}

func (n *notificationService) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	n.mu.Lock()
	n.requests = append(n.requests, r)
	n.bodies = append(n.bodies, string(body))
	status, header := n.status, n.header
	n.mu.Unlock()
	for k, v := range header {
		w.Header()[k] = v
	}
	w.WriteHeader(status)
}

func notifierModule(t *testing.T, s *Sandbox, url string) *Module {
	host := strings.TrimPrefix(url, "http://")
	return load(t, s, "samples/shipment-notifier", ModuleConfig{
		AllowedHosts: []string{host},
		Config:       map[string]string{"notifications-url": url},
	})
}

func TestShipmentNotifierOutcomes(t *testing.T) {
	s := newSandbox(t, Config{})
	svc := &notificationService{}
	srv := httptest.NewServer(svc)
	defer srv.Close()
	m := notifierModule(t, s, srv.URL)

	tests := []struct {
		name        string
		status      int
		header      http.Header
		wantKind    OutcomeKind
		wantClasses []string
		wantFKind   abi.FailureKind
		wantAfterMs uint64
		want429     bool
		wantWait    time.Duration // the Retry-After the host observed
	}{
		{"notified", 202, nil, Success, nil, 0, 0, false, 0},
		{"unknown buyer", 404, nil, GuestFailure, []string{"UnknownBuyer", "Notification"}, abi.KindUnspecified, 0, false, 0},
		{"service error", 503, nil, GuestFailure, []string{"Notification"}, abi.KindUnspecified, 0, false, 0},
		{"busy with Retry-After", 429, http.Header{"Retry-After": {"2"}}, GuestFailure, []string{"Notification"}, abi.KindBackpressure, 2000, true, 2 * time.Second},
		// Too large for a Duration: the guest cannot read it, the host caps it.
		{"busy with a huge Retry-After", 429, http.Header{"Retry-After": {"99999999999999999999"}}, GuestFailure, []string{"Notification"}, abi.KindBackpressure, 0, true, retry.MaxRetryAfter},
		{"busy with a Retry-After date in 9999", 429, http.Header{"Retry-After": {"Fri, 31 Dec 9999 23:59:59 GMT"}}, GuestFailure, []string{"Notification"}, abi.KindBackpressure, 0, true, retry.MaxRetryAfter},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc.mu.Lock()
			svc.status, svc.header, svc.requests = tt.status, tt.header, nil
			svc.mu.Unlock()
			ev := shipped("order-1", "buyer-7", 6)
			o := m.Invoke(context.Background(), ev, 5*time.Second)
			if o.Kind != tt.wantKind {
				t.Fatalf("outcome %v (%s), want %v", o.Kind, o.Error(), tt.wantKind)
			}
			if !slices.Equal(o.Failure.Classes, tt.wantClasses) || o.Failure.Kind != tt.wantFKind || o.Failure.RetryAfterMillis != tt.wantAfterMs {
				t.Errorf("failure = %+v", o.Failure)
			}
			if o.Observed.HTTP429 != tt.want429 || o.Observed.RetryAfter != tt.wantWait {
				t.Errorf("observed = %+v", o.Observed)
			}
			svc.mu.Lock()
			defer svc.mu.Unlock()
			if len(svc.requests) != 1 {
				t.Fatalf("%d requests", len(svc.requests))
			}
			r := svc.requests[0]
			if r.URL.Path != "/buyers/buyer-7/notifications" || r.Header.Get("Idempotency-Key") != ev.InvocationKey {
				t.Errorf("request %s %s key %q", r.Method, r.URL.Path, r.Header.Get("Idempotency-Key"))
			}
		})
	}
}

func TestShipmentNotifierConnectionRefusedIsSystemic(t *testing.T) {
	s := newSandbox(t, Config{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now
	m := notifierModule(t, s, url)
	o := m.Invoke(context.Background(), shipped("order-2", "buyer-7", 1), 5*time.Second)
	if o.Kind != GuestFailure || o.Failure.Kind != abi.KindSystemic || !o.Observed.ConnRefused {
		t.Fatalf("outcome %v failure %+v observed %+v", o.Kind, o.Failure, o.Observed)
	}
	if !slices.Equal(o.Failure.Classes, []string{retry.ClassConnectionRefused, retry.ClassHostError}) {
		t.Errorf("classes = %v", o.Failure.Classes)
	}
}

func TestOutboundHostNotAllowed(t *testing.T) {
	s := newSandbox(t, Config{})
	svc := &notificationService{status: 200}
	srv := httptest.NewServer(svc)
	defer srv.Close()
	m := load(t, s, "samples/shipment-notifier", ModuleConfig{Config: map[string]string{"notifications-url": srv.URL}})
	o := m.Invoke(context.Background(), shipped("order-3", "buyer-7", 1), 5*time.Second)
	if o.Kind != GuestFailure || o.Failure.Classes[0] != retry.ClassOutboundDenied || !strings.Contains(o.Failure.Message, "not in the module's allowed hosts") {
		t.Fatalf("outcome %v failure %+v", o.Kind, o.Failure)
	}
	if len(svc.requests) != 0 {
		t.Errorf("the denied request reached the server")
	}
}

func TestGuestFailuresAndTraps(t *testing.T) {
	var logs bytes.Buffer
	var logMu sync.Mutex
	s := newSandbox(t, Config{Logger: slog.New(slog.NewTextHandler(lockedWriter{&logs, &logMu}, nil))})
	m := load(t, s, "samples/misbehaving", ModuleConfig{MemoryLimitPages: 512})
	tests := []struct {
		handler  string
		wantKind OutcomeKind
		wantText string
	}{
		{"panicker", GuestFailure, "panic: the handler panicked on purpose"},
		{"crasher", Trap, "panic: a goroutine crashed the guest on purpose"},
		{"memoryHog", MemoryExceeded, "memory limit of 512 pages"},
		// One block past the limit: the host refused the memory.grow, and
		// says so, whatever the guest printed.
		{"bigAlloc", MemoryExceeded, "memory limit of 512 pages (32 MiB): the host refused to grow its memory to"},
		{"badPointer", Trap, "pointer outside its memory"},
		{"echo", Success, ""},
	}
	for _, tt := range tests {
		t.Run(tt.handler, func(t *testing.T) {
			o := m.Invoke(context.Background(), &abi.Event{Handler: tt.handler, InvocationKey: "Misbehaving." + tt.handler + ":a@1:0"}, 20*time.Second)
			if o.Kind != tt.wantKind {
				t.Fatalf("outcome %v (%s), want %v", o.Kind, o.Error(), tt.wantKind)
			}
			if !strings.Contains(o.Error(), tt.wantText) {
				t.Errorf("error %q, want it to mention %q", o.Error(), tt.wantText)
			}
			// The module lives on: the next call on it succeeds.
			if o := m.Invoke(context.Background(), &abi.Event{Handler: "echo", InvocationKey: "Misbehaving.echo:b@1:0"}, 5*time.Second); o.Kind != Success {
				t.Fatalf("after %s: %v %s", tt.handler, o.Kind, o.Error())
			}
		})
	}
	logMu.Lock()
	defer logMu.Unlock()
	// The guest's log line: attributed to module, handler and key, its own
	// fields kept as fields (not flattened into the message), no host source.
	guestLine := "msg=echo module=samples/misbehaving handler=echo key=Misbehaving.echo:a@1:0 fields.key=Misbehaving.echo:a@1:0\n"
	for _, want := range []string{guestLine, "stdout line from Misbehaving.echo:a@1:0"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
