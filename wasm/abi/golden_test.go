package abi

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/vectors.txt from the Go codec")

// goldenValues are the messages of testdata/vectors.txt, by name. The Rust
// SDK's tests (guest-sdk/rust/tests/golden.rs) build the same values and
// check that they encode to the same bytes and decode back, so that both
// codecs speak one ABI.
func goldenValues() []struct {
	name string
	enc  []byte
} {
	var out []struct {
		name string
		enc  []byte
	}
	add := func(name string, b []byte) {
		out = append(out, struct {
			name string
			enc  []byte
		}{name, b})
	}
	for _, u := range []uint64{0, 1, 127, 128, 300, 16384, 1<<32 - 1, 1<<64 - 1} {
		e := Encoder{}
		e.Uint(u)
		add(fmt.Sprintf("uint %d", u), e.Bytes())
	}
	for _, i := range []int64{0, -1, 1, -64, 64, -1 << 63, 1<<63 - 1} {
		e := Encoder{}
		e.Int(i)
		add(fmt.Sprintf("int %d", i), e.Bytes())
	}
	add("event", AppendEvent(nil, &Event{Handler: "onOrderShipped", InvocationKey: "ShipmentNotifier.onOrderShipped:Order/o-1@6:0",
		Attempt: 3, Type: "OrderShipped", AggregateType: "Order", AggregateID: "o-1", Version: 6, Index: 2, OwnerID: "buyer-7",
		Position: 42, TimeUnixNano: -5, DeadlineUnixNano: 1 << 62, Payload: []byte(`{"a":1}`)}))
	add("event empty", AppendEvent(nil, &Event{}))
	add("result ok", AppendResult(nil, &Result{Status: StatusOK}))
	add("result failed", AppendResult(nil, &Result{Status: StatusFailed, Failure: Failure{Kind: KindBackpressure,
		Classes: []string{"UnknownBuyer", "Notification"}, Message: "größe busy", Code: "E42", RetryAfterMillis: 2000}}))
	add("result systemic unclassified", AppendResult(nil, &Result{Status: StatusFailed, Failure: Failure{Kind: KindSystemic, Message: "down"}}))
	add("description", AppendDescription(nil, &Description{ABIVersion: Version, Processor: "ShipmentNotifier", Kind: KindSaga,
		Start: StartBeginning,
		Retry: RetrySettings{MaxAttempts: 5, InitialBackoff: time.Second, MaxBackoff: 30 * time.Second, Timeout: 10 * time.Second,
			Unrecoverable: []string{"UnknownBuyer"}},
		Handlers: []HandlerDesc{
			{Name: "onOrderShipped", EventTypes: []string{"OrderShipped", "OrderReturned"}},
			{Name: "onRejected", EventTypes: []string{EventCommandRejected}, Retry: RetrySettings{Timeout: 2 * time.Second, Recoverable: []string{"Notification"}}},
		},
		Classes: []ErrorClass{{Name: "Notification"}, {Name: "UnknownBuyer", Parent: "Notification"}},
	}))
	add("reply", AppendReply(nil, &Reply{Code: ReplyBackpressure, Message: "busy", RetryAfterMillis: 1500, Body: []byte("x")}))
	add("reply empty", AppendReply(nil, &Reply{}))
	add("http request", AppendHTTPRequest(nil, &HTTPRequest{Method: "POST", URL: "http://x/y",
		Headers: []Header{{"Idempotency-Key", "P.h:A/1@1:0"}, {"Content-Type", "application/json"}}, Body: []byte("{}")}))
	add("http response", AppendHTTPResponse(nil, &HTTPResponse{Status: 429, Headers: []Header{{"Retry-After", "2"}}, Body: []byte("slow")}))
	add("kv put", AppendKVPut(nil, &KVPut{Key: "order/o-1", Value: []byte(`{"total":30}`)}))
	add("command", AppendCommand(nil, &Command{AggregateType: "Stock", AggregateID: "s-1", Type: "Reserve", Payload: []byte(`{"n":2}`)}))
	return out
}

// TestGoldenVectors pins the Go codec's bytes to testdata/vectors.txt, which
// the Rust SDK's codec is checked against too. Run with -update to rewrite it
// after a deliberate change (which is a new ABI version).
func TestGoldenVectors(t *testing.T) {
	var want bytes.Buffer
	want.WriteString("# ABI v1 golden vectors: <name>: <hex of the encoding>, written by the Go codec\n")
	want.WriteString("# (go test ./wasm/abi -run TestGoldenVectors -update); read by guest-sdk/rust/tests/golden.rs.\n")
	for _, v := range goldenValues() {
		fmt.Fprintf(&want, "%s: %s\n", v.name, hex.EncodeToString(v.enc))
	}
	// Every vector decodes with the Go codec.
	for name, b := range goldenFile(t, "testdata/vectors.txt", want.Bytes()) {
		if err := decodeGolden(name, b); err != nil {
			t.Errorf("%s does not decode: %v", name, err)
		}
	}
}

// goldenFile checks that the file at path holds want (writing it first
// under -update), and returns its "<name>: <hex>" lines' bytes by name.
func goldenFile(t *testing.T, path string, want []byte) map[string][]byte {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from what the Go side writes:\n%s\nwant:\n%s", path, got, want)
	}
	out := map[string][]byte{}
	sc := bufio.NewScanner(bytes.NewReader(got))
	for sc.Scan() {
		name, hx, ok := strings.Cut(sc.Text(), ": ")
		if !ok || strings.HasPrefix(name, "#") {
			continue
		}
		b, err := hex.DecodeString(hx)
		if err != nil {
			t.Fatalf("%s: %s: %v", path, name, err)
		}
		out[name] = b
	}
	return out
}

func decodeGolden(name string, b []byte) error {
	var err error
	switch {
	case strings.HasPrefix(name, "uint "), strings.HasPrefix(name, "int "):
		d := NewDecoder(b)
		if strings.HasPrefix(name, "uint ") {
			d.Uint()
		} else {
			d.Int()
		}
		err = d.Done()
	case strings.HasPrefix(name, "event"):
		_, err = DecodeEvent(b)
	case strings.HasPrefix(name, "result"):
		_, err = DecodeResult(b)
	case name == "description":
		_, err = DecodeDescription(b)
	case strings.HasPrefix(name, "reply"):
		_, err = DecodeReply(b)
	case name == "http request":
		_, err = DecodeHTTPRequest(b)
	case name == "http response":
		_, err = DecodeHTTPResponse(b)
	case name == "kv put":
		_, err = DecodeKVPut(b)
	case name == "command":
		_, err = DecodeCommand(b)
	default:
		err = fmt.Errorf("no decoder for %q", name)
	}
	return err
}
