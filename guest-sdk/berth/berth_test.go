package berth

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/wasm/abi"
)

var (
	notification = NewErrorClass("Notification", nil)
	unknownBuyer = NewErrorClass("UnknownBuyer", notification)
)

func TestErrorClasses(t *testing.T) {
	err := fmt.Errorf("notify: %w", unknownBuyer.New("no such buyer"))
	if !errors.Is(err, unknownBuyer) || !errors.Is(err, notification) {
		t.Fatal("errors.Is does not see the class or its parent")
	}
	if errors.Is(notification.New("x"), unknownBuyer) {
		t.Fatal("a parent class matched its child")
	}
	f := failureOf(err)
	if !slices.Equal(f.Classes, []string{"UnknownBuyer", "Notification"}) || f.Message != "notify: no such buyer" {
		t.Fatalf("failure = %+v", f)
	}
}

func TestFailureKinds(t *testing.T) {
	tests := []struct {
		name      string
		err       error
		wantKind  abi.FailureKind
		wantAfter uint64
		wantClass []string
	}{
		{"plain error", errors.New("boom"), abi.KindUnspecified, 0, nil},
		{"systemic", Systemic(errors.New("db down")), abi.KindSystemic, 0, nil},
		{"backpressure keeps the class", Backpressure(notification.New("busy"), 2*time.Second), abi.KindBackpressure, 2000, []string{"Notification"}},
		{"wrapped backpressure", fmt.Errorf("ctx: %w", Backpressure(errors.New("busy"), 1500*time.Microsecond)), abi.KindBackpressure, 2, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := failureOf(tt.err)
			if f.Kind != tt.wantKind || f.RetryAfterMillis != tt.wantAfter || !slices.Equal(f.Classes, tt.wantClass) {
				t.Fatalf("failure = %+v", f)
			}
		})
	}
}

func TestDispatch(t *testing.T) {
	p := &Processor{Name: "P", Kind: Reactor}
	p.On("ok", "A", func(c *Context) error {
		if c.InvocationKey != "P.ok:T/1@2:0" || c.Event.Version != 2 {
			return fmt.Errorf("context %+v", c)
		}
		return nil
	})
	p.On("fails", "B", func(*Context) error { return unknownBuyer.New("nope").WithCode("E1") })
	p.On("panics", "C", func(*Context) error { panic("kaboom") })
	tests := []struct {
		handler string
		status  uint8
		classes []string
		message string
	}{
		{"ok", abi.StatusOK, nil, ""},
		{"fails", abi.StatusFailed, []string{"UnknownBuyer", "Notification"}, "nope"},
		{"panics", abi.StatusFailed, []string{"berth.Panic"}, "panic: kaboom"},
		{"missing", abi.StatusFailed, []string{"berth.HostError"}, `no handler "missing"`},
	}
	for _, tt := range tests {
		t.Run(tt.handler, func(t *testing.T) {
			r := p.Dispatch(&abi.Event{Handler: tt.handler, InvocationKey: InvocationKey("P", tt.handler, "T", "1", 2, 0), Version: 2}, Ports{})
			if r.Status != tt.status || !slices.Equal(r.Failure.Classes, tt.classes) || !strings.Contains(r.Failure.Message, tt.message) {
				t.Fatalf("result = %+v", r)
			}
		})
	}
}

func TestDescribeCollectsClassTree(t *testing.T) {
	p := &Processor{Name: "ShipmentNotifier", Kind: Reactor, Retry: Retry{MaxAttempts: 5, Unrecoverable: []*ErrorClass{unknownBuyer}}}
	p.On("onOrderShipped", "OrderShipped", func(*Context) error { return nil }, Retry{Timeout: time.Second})
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	d := p.Describe()
	want := []abi.ErrorClass{{Name: "Notification"}, {Name: "UnknownBuyer", Parent: "Notification"}}
	if !slices.Equal(d.Classes, want) {
		t.Fatalf("classes = %+v", d.Classes)
	}
	if d.Handlers[0].Retry.Timeout != time.Second || d.Retry.MaxAttempts != 5 {
		t.Fatalf("retry = %+v / %+v", d.Retry, d.Handlers[0].Retry)
	}
	if err := (&Processor{Name: "P", Kind: Reactor}).Validate(); err == nil || !strings.Contains(err.Error(), "no handlers") {
		t.Fatalf("err = %v", err)
	}
}
