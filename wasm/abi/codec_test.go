package abi

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
	"unsafe"
)

func sampleDescription() Description {
	return Description{
		ABIVersion: Version,
		Processor:  "ShipmentNotifier",
		Kind:       KindReactor,
		Start:      StartDefault,
		Retry: RetrySettings{MaxAttempts: 5, InitialBackoff: time.Second, MaxBackoff: 30 * time.Second,
			Timeout: 10 * time.Second, Unrecoverable: []string{"UnknownBuyer"}},
		Handlers: []HandlerDesc{{Name: "onOrderShipped", EventTypes: []string{"OrderShipped"}}},
		Classes:  []ErrorClass{{Name: "Notification"}, {Name: "UnknownBuyer", Parent: "Notification"}},
	}
}

func TestRoundTrips(t *testing.T) {
	ev := Event{Handler: "onOrderShipped", InvocationKey: "ShipmentNotifier.onOrderShipped:o-1@6:0", Attempt: 3,
		Type: "OrderShipped", AggregateType: "Order", AggregateID: "o-1", Version: 6, Index: 0, OwnerID: "buyer-7",
		Position: 42, TimeUnixNano: -5, DeadlineUnixNano: 1 << 62, Payload: []byte(`{"a":1}`)}
	desc := sampleDescription()
	tests := []struct {
		name   string
		value  any
		encode func() []byte
		decode func([]byte) (any, error)
	}{
		{"event", ev, func() []byte { return AppendEvent(nil, &ev) }, func(b []byte) (any, error) { return DecodeEvent(b) }},
		{"borrowed event", ev, func() []byte { return AppendEvent(nil, &ev) }, func(b []byte) (any, error) {
			var got Event
			err := BorrowEvent(b, &got)
			return got, err
		}},
		{"ok result", Result{Status: StatusOK}, func() []byte { return AppendResult(nil, &Result{}) }, func(b []byte) (any, error) { return DecodeResult(b) }},
		{"failed result", Result{Status: StatusFailed, Failure: Failure{Kind: KindBackpressure, Classes: []string{"UnknownBuyer", "Notification"}, Message: "busy", Code: "E42", RetryAfterMillis: 2000}},
			func() []byte {
				return AppendResult(nil, &Result{Status: StatusFailed, Failure: Failure{Kind: KindBackpressure, Classes: []string{"UnknownBuyer", "Notification"}, Message: "busy", Code: "E42", RetryAfterMillis: 2000}})
			},
			func(b []byte) (any, error) { return DecodeResult(b) }},
		{"description", desc, func() []byte { return AppendDescription(nil, &desc) }, func(b []byte) (any, error) { return DecodeDescription(b) }},
		{"reply", Reply{Code: ReplyRefused, Message: "refused", RetryAfterMillis: 7, Body: []byte("x")},
			func() []byte {
				return AppendReply(nil, &Reply{Code: ReplyRefused, Message: "refused", RetryAfterMillis: 7, Body: []byte("x")})
			},
			func(b []byte) (any, error) { return DecodeReply(b) }},
		{"http request", HTTPRequest{Method: "POST", URL: "http://x/y", Headers: []Header{{"A", "b"}}, Body: []byte("{}")},
			func() []byte {
				return AppendHTTPRequest(nil, &HTTPRequest{Method: "POST", URL: "http://x/y", Headers: []Header{{"A", "b"}}, Body: []byte("{}")})
			},
			func(b []byte) (any, error) { return DecodeHTTPRequest(b) }},
		{"http response", HTTPResponse{Status: 429, Headers: []Header{{"Retry-After", "2"}}},
			func() []byte {
				return AppendHTTPResponse(nil, &HTTPResponse{Status: 429, Headers: []Header{{"Retry-After", "2"}}})
			},
			func(b []byte) (any, error) { return DecodeHTTPResponse(b) }},
		{"kv put", KVPut{Key: "k", Value: []byte("v")}, func() []byte { return AppendKVPut(nil, &KVPut{Key: "k", Value: []byte("v")}) },
			func(b []byte) (any, error) { return DecodeKVPut(b) }},
		{"command", Command{AggregateType: "Stock", AggregateID: "s-1", Type: "Reserve", Payload: []byte("{}")},
			func() []byte {
				return AppendCommand(nil, &Command{AggregateType: "Stock", AggregateID: "s-1", Type: "Reserve", Payload: []byte("{}")})
			},
			func(b []byte) (any, error) { return DecodeCommand(b) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.encode()
			got, err := tt.decode(b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.value) {
				t.Fatalf("got %+v\nwant %+v", got, tt.value)
			}
			// Every strict prefix is an error, never a panic or a silent success.
			for i := 0; i < len(b); i++ {
				if _, err := tt.decode(b[:i]); err == nil {
					t.Fatalf("prefix of %d bytes decoded without error", i)
				}
			}
			// Trailing bytes are an error too.
			if _, err := tt.decode(append(b, 0)); err == nil {
				t.Fatal("trailing byte accepted")
			}
		})
	}
}

// TestBorrowEventCopiesNothing: a borrowed event's strings and payload
// point into the envelope, and decoding it allocates nothing.
func TestBorrowEventCopiesNothing(t *testing.T) {
	b := AppendEvent(nil, &Event{Handler: "h", InvocationKey: "P.h:A/1@1:0", Type: "T", AggregateType: "A",
		AggregateID: "1", OwnerID: "o", Payload: []byte("{}")})
	var ev Event
	if allocs := testing.AllocsPerRun(100, func() {
		if err := BorrowEvent(b, &ev); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Errorf("BorrowEvent allocates %v times", allocs)
	}
	within := func(p *byte) bool {
		start, end := uintptr(unsafe.Pointer(&b[0])), uintptr(unsafe.Pointer(&b[len(b)-1]))
		return uintptr(unsafe.Pointer(p)) >= start && uintptr(unsafe.Pointer(p)) <= end
	}
	for _, s := range []string{ev.Handler, ev.InvocationKey, ev.Type, ev.AggregateType, ev.AggregateID, ev.OwnerID} {
		if !within(unsafe.StringData(s)) {
			t.Errorf("%q is a copy, not a view of the envelope", s)
		}
	}
	if !within(&ev.Payload[0]) {
		t.Error("the payload is a copy")
	}
}

func TestDecodeRefusesHugeLengths(t *testing.T) {
	e := Encoder{}
	e.Uint(1 << 40) // a string claiming a terabyte
	if _, err := DecodeHTTPRequest(e.Bytes()); !errors.Is(err, ErrTruncated) {
		t.Fatalf("err = %v", err)
	}
}

func TestDescriptionValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(d *Description)
		want   string
	}{
		{"valid", func(*Description) {}, ""},
		{"no processor", func(d *Description) { d.Processor = "" }, "processor has no name"},
		{"bad name", func(d *Description) { d.Processor = "Ship Notifier" }, `processor name "Ship Notifier"`},
		{"bad kind", func(d *Description) { d.Kind = 9 }, "unknown kind 9"},
		{"no handlers", func(d *Description) { d.Handlers = nil }, "has no handlers"},
		{"duplicate handler", func(d *Description) { d.Handlers = append(d.Handlers, d.Handlers[0]) }, "declared twice"},
		{"handler without type", func(d *Description) { d.Handlers[0].EventTypes = nil }, "has no event type"},
		{"negative timeout", func(d *Description) { d.Handlers[0].Retry.Timeout = -1 }, "handler onOrderShipped retry: timeout -1ns is negative"},
		{"unknown parent", func(d *Description) { d.Classes[1].Parent = "Nope" }, "unknown parent Nope"},
		{"cycle", func(d *Description) { d.Classes[0].Parent = "UnknownBuyer" }, "its own ancestor"},
		{"cycle named whole", func(d *Description) {
			d.Classes = []ErrorClass{{"Top", ""}, {"A", "B"}, {"B", "C"}, {"C", "A"}, {"Leaf", "A"}}
		}, "error class A is its own ancestor (A -> B -> C -> A)"},
		{"class below a cycle", func(d *Description) {
			d.Classes = []ErrorClass{{"Leaf", "A"}, {"A", "B"}, {"B", "A"}}
		}, "error class A is its own ancestor (A -> B -> A)"},
		{"parent of itself", func(d *Description) { d.Classes[0].Parent = d.Classes[0].Name }, "error class Notification is its own parent"},
		{"declared twice", func(d *Description) { d.Classes = append(d.Classes, ErrorClass{Name: "Notification"}) }, "error class Notification is declared twice"},
		{"empty class name", func(d *Description) { d.Classes = append(d.Classes, ErrorClass{Parent: "Notification"}) }, "error class 3 has no name"},
		{"class name not UTF-8", func(d *Description) { d.Classes = append(d.Classes, ErrorClass{Name: "Bad\xff"}) }, `error class "Bad\xff": name is not valid UTF-8`},
		{"unknown parent named", func(d *Description) { d.Classes = append(d.Classes, ErrorClass{Name: "FatalLeaf", Parent: "Fatal"}) }, "error class FatalLeaf has unknown parent Fatal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := sampleDescription()
			d.Handlers = append([]HandlerDesc(nil), d.Handlers...)
			d.Classes = append([]ErrorClass(nil), d.Classes...)
			tt.change(&d)
			err := d.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestDecodeDescriptionRefusesOtherVersions(t *testing.T) {
	d := sampleDescription()
	d.ABIVersion = 2
	_, err := DecodeDescription(AppendDescription(nil, &d))
	if err == nil || !strings.Contains(err.Error(), "ABI version 2") {
		t.Fatalf("err = %v", err)
	}
}

func TestPack(t *testing.T) {
	p, n := Unpack(Pack(0xdeadbeef, 17))
	if p != 0xdeadbeef || n != 17 {
		t.Fatalf("%x %d", p, n)
	}
}

// FuzzDecode feeds arbitrary bytes to every decoder: none may panic, and
// whatever decodes must encode back to the same bytes.
func FuzzDecode(f *testing.F) {
	d := sampleDescription()
	f.Add(AppendEvent(nil, &Event{Handler: "h", Type: "T", Payload: []byte("{}")}))
	f.Add(AppendResult(nil, &Result{Status: StatusFailed, Failure: Failure{Classes: []string{"A", "B"}, Message: "m"}}))
	f.Add(AppendDescription(nil, &d))
	f.Add(AppendHTTPRequest(nil, &HTTPRequest{Method: "GET", URL: "http://a", Headers: []Header{{"X", "y"}}}))
	f.Add(AppendCommand(nil, &Command{AggregateType: "A", AggregateID: "1", Type: "C"}))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		ev, err := DecodeEvent(b)
		if err == nil {
			if got := AppendEvent(nil, &ev); string(got) != string(b) {
				t.Errorf("event re-encodes differently")
			}
		}
		var borrowed Event
		if berr := BorrowEvent(b, &borrowed); (berr == nil) != (err == nil) || (err == nil && !reflect.DeepEqual(borrowed, ev)) {
			t.Errorf("BorrowEvent: %+v, %v; DecodeEvent: %+v, %v", borrowed, berr, ev, err)
		}
		if r, err := DecodeResult(b); err == nil && r.Status == StatusFailed {
			if got := AppendResult(nil, &r); string(got) != string(b) {
				t.Errorf("result re-encodes differently")
			}
		}
		if d, err := DecodeDescription(b); err == nil {
			_ = d.Validate()
		}
		DecodeReply(b)
		DecodeHTTPRequest(b)
		DecodeHTTPResponse(b)
		DecodeKVPut(b)
		DecodeCommand(b)
	})
}

// A failure whose class names, message or code are not UTF-8 (or whose class
// is empty) is an invalid result: the host must not store it as is.
func TestDecodeResultRefusesInvalidText(t *testing.T) {
	tests := []struct {
		name string
		f    Failure
		want string
	}{
		{"class not UTF-8", Failure{Classes: []string{"Fatal\xffLeaf"}, Message: "m"}, `failure class 1 "Fatal\xffLeaf" is not valid UTF-8`},
		{"second class not UTF-8", Failure{Classes: []string{"A", "\xc3"}}, `failure class 2 "\xc3" is not valid UTF-8`},
		{"empty class", Failure{Classes: []string{"A", ""}}, "failure class 2 is empty"},
		{"message not UTF-8", Failure{Message: "bad \xfe\xff bytes"}, `failure message "bad \xfe\xff bytes" is not valid UTF-8`},
		{"code not UTF-8", Failure{Code: "E\x80"}, `failure code "E\x80" is not valid UTF-8`},
	}
	for _, tt := range tests {
		_, err := DecodeResult(AppendResult(nil, &Result{Status: StatusFailed, Failure: tt.f}))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want %q", tt.name, err, tt.want)
		}
		if err != nil && !utf8.ValidString(err.Error()) {
			t.Errorf("%s: the error itself is not UTF-8: %q", tt.name, err)
		}
	}
	ok := Failure{Classes: []string{"Überweisung", "Zahlung"}, Message: "Käufer unbekannt ✓", Code: "E-42"}
	if r, err := DecodeResult(AppendResult(nil, &Result{Status: StatusFailed, Failure: ok})); err != nil || r.Failure.Message != ok.Message {
		t.Errorf("valid UTF-8 refused: %v", err)
	}
}

// TestEventIsNeverEmpty pins what ABI.md says of berth_alloc's size: the
// host asks for the length of an encoded Event, and even the zero Event
// is 13 bytes (one per field), so berth_alloc is never asked for 0.
func TestEventIsNeverEmpty(t *testing.T) {
	if n := len(AppendEvent(nil, &Event{})); n != 13 {
		t.Fatalf("the zero Event encodes to %d bytes, want 13", n)
	}
}
