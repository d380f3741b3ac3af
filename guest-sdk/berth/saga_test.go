package berth

import (
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/berthhq/berth/wasm/abi"
)

func TestOnRejected(t *testing.T) {
	errCompensation := errors.New("cannot compensate")
	var got []Rejection
	var keys []string
	p := &Processor{Name: "OrderSaga", Kind: Saga}
	p.On("onOrderPlaced", "OrderPlaced", func(*Context) error { return nil })
	p.OnRejected("onRejected", func(c *Context, r Rejection) error {
		got = append(got, r)
		keys = append(keys, c.InvocationKey)
		if r.Reason == "fail" {
			return errCompensation
		}
		return nil
	})
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	if h := p.HandlerFor(EventCommandRejected); h == nil || h.Name != "onRejected" {
		t.Fatalf("HandlerFor(%s) = %+v", EventCommandRejected, h)
	}
	d := p.Describe()
	if !slices.Equal(d.Handlers[1].EventTypes, []string{abi.EventCommandRejected}) {
		t.Errorf("described event types %v", d.Handlers[1].EventTypes)
	}

	full := Rejection{
		Command:   Command{AggregateType: "Stock", AggregateID: "sku-9", Type: "ReserveStock", Payload: []byte(`{"order":"o-1","quantity":2}`)},
		Reason:    "out of stock",
		Status:    409,
		EventType: "OrderPlaced",
		RequestID: "OrderSaga.onOrderPlaced:o-1@1:0/0",
	}
	tests := []struct {
		name       string
		payload    []byte
		want       Rejection
		wantStatus uint8
		wantClass  string
	}{
		{"every field", EncodeRejection(full), full, abi.StatusOK, ""},
		{"the host's JSON", []byte(`{"command":{"aggregateType":"Stock","aggregateId":"sku-9","type":"ReserveStock","payload":{"order":"o-1","quantity":2}},` +
			`"reason":"out of stock","status":409,"eventType":"OrderPlaced","requestId":"OrderSaga.onOrderPlaced:o-1@1:0/0"}`), full, abi.StatusOK, ""},
		{"no payload", []byte(`{"command":{"aggregateType":"A","aggregateId":"1","type":"C","payload":null},"status":422}`),
			Rejection{Command: Command{AggregateType: "A", AggregateID: "1", Type: "C"}, Status: 422}, abi.StatusOK, ""},
		{"handler fails", []byte(`{"reason":"fail","status":409}`), Rejection{Reason: "fail", Status: 409}, abi.StatusFailed, ""},
		{"not JSON", []byte(`nope`), Rejection{}, abi.StatusFailed, ClassHost.Name()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, keys = nil, nil
			ev := &abi.Event{Handler: "onRejected", InvocationKey: "OrderSaga.onOrderPlaced:o-1@1:0:rejected:0", Type: abi.EventCommandRejected, Payload: tt.payload}
			res := p.Dispatch(ev, Ports{})
			if res.Status != tt.wantStatus {
				t.Fatalf("status %d (%+v), want %d", res.Status, res.Failure, tt.wantStatus)
			}
			if tt.wantClass != "" {
				if !slices.Contains(res.Failure.Classes, tt.wantClass) || len(got) != 0 {
					t.Errorf("failure %+v, calls %d; want class %s and no call", res.Failure, len(got), tt.wantClass)
				}
				return
			}
			if len(got) != 1 || !reflect.DeepEqual(got[0], tt.want) {
				t.Errorf("rejection = %+v, want %+v", got, tt.want)
			}
			if keys[0] != ev.InvocationKey {
				t.Errorf("key = %q", keys[0])
			}
		})
	}
}

func TestEncodeRejectionPayloads(t *testing.T) {
	tests := []struct {
		payload []byte
		want    []byte // what DecodeRejection gives back
	}{
		{nil, nil},
		{[]byte(" "), nil},
		{[]byte(`{"a":1}`), []byte(`{"a":1}`)},
		{[]byte(`not json`), []byte(`"not json"`)},
	}
	for _, tt := range tests {
		r, err := DecodeRejection(EncodeRejection(Rejection{Command: Command{Type: "C", Payload: tt.payload}}))
		if err != nil || string(r.Command.Payload) != string(tt.want) {
			t.Errorf("payload %q: got %q, %v; want %q", tt.payload, r.Command.Payload, err, tt.want)
		}
	}
}
