package abi

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestBlobIsTextWhenItCanBe(t *testing.T) {
	for _, b := range []Blob{Blob(`{"buyer":"b-1"}`), {0xff, 0x00, 0x10}, Blob("base64:looks encoded"), nil} {
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		var back Blob
		if err := json.Unmarshal(j, &back); err != nil || !bytes.Equal(back, b) {
			t.Fatalf("%q: encoded %s, decoded %q (%v)", b, j, back, err)
		}
	}
	if j, _ := json.Marshal(Blob(`hello`)); string(j) != `"hello"` {
		t.Fatalf("text encoded as %s", j)
	}
}

func TestCapsuleRoundTripAndFormat(t *testing.T) {
	ev := Event{Handler: "h", InvocationKey: "P.h:Order/1@1:0", Attempt: 3, Type: "T", Payload: []byte(`{}`)}
	c := &Capsule{Module: CapsuleModule{Name: "m"}, Event: CapsuleEventOf(&ev), Calls: []CapsuleCall{{Fn: CallConfig, Key: "k",
		Reply: CapsuleReplyOf(&Reply{Code: ReplyNotFound, Message: "no"})}}, Outcome: CapsuleOutcome{Kind: "failure"}}
	b, err := EncodeCapsule(c)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeCapsule(b)
	if err != nil {
		t.Fatal(err)
	}
	if e := got.Event.ToEvent(); e.InvocationKey != ev.InvocationKey || e.Attempt != 3 || string(e.Payload) != "{}" {
		t.Fatalf("event back as %+v", e)
	}
	r, err := got.Calls[0].Reply.ToReply()
	if err != nil || r.Code != ReplyNotFound {
		t.Fatalf("reply back as %+v, %v", r, err)
	}
	other := strings.Replace(string(b), CapsuleFormat, "berth-capsule/2", 1)
	if _, err := DecodeCapsule([]byte(other)); err == nil || !strings.Contains(err.Error(), "berth-capsule/2") {
		t.Fatalf("another format: %v", err)
	}
}

func TestCapsuleMatcherInOrderOutOfOrderNotRecorded(t *testing.T) {
	get := func(url string) CapsuleCall {
		return CapsuleCall{Fn: CallHTTP, HTTP: &CapsuleHTTP{URL: url}}
	}
	m := NewCapsuleMatcher([]CapsuleCall{{Fn: CallLog}, get("http://s/a"), get("http://s/b")})
	a, b := get("http://s/a"), get("http://s/b")
	a.HTTP.Method = "GET" // none recorded is GET
	for _, c := range []struct {
		made        CapsuleCall
		j, due      int
		departsWith string
	}{
		{b, 2, 1, "out of order: answered as recorded call #2"},
		{a, 1, 1, ""},
		{get("http://s/c"), -1, -1, "not recorded"},
	} {
		j, due, note := m.Match(&c.made)
		if j != c.j || due != c.due || !strings.HasPrefix(note, c.departsWith) || (c.departsWith == "") != (note == "") {
			t.Errorf("Match(%s) = %d, %d, %q; want %d, %d, %q", c.made.HTTP.URL, j, due, note, c.j, c.due, c.departsWith)
		}
	}
}
