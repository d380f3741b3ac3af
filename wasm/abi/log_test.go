package abi

import (
	"errors"
	"reflect"
	"testing"
)

// A line with fields decodes to its message and fields in order, numbers
// whole or not, an error by its text; a plain line, one without pairs and
// one cut short are all message.
func TestLogLineFields(t *testing.T) {
	line := EncodeLogLine("sent", []any{"order", "o-1", "tries", 3, "ratio", 0.5, "err", errors.New("boom"), "ok", true})
	msg, kv := DecodeLogLine(line)
	want := []any{"order", "o-1", "tries", int64(3), "ratio", 0.5, "err", "boom", "ok", true}
	if msg != "sent" || !reflect.DeepEqual(kv, want) {
		t.Fatalf("decoded %q %#v", msg, kv)
	}
	for _, tt := range []struct {
		line []byte
		msg  string
	}{
		{[]byte("plain k=v"), "plain k=v"},
		{EncodeLogLine("no pairs", []any{"lonely"}), "no pairs"},
		{line[:10], string(line[1:10])},
	} {
		if msg, kv := DecodeLogLine(tt.line); msg != tt.msg || kv != nil {
			t.Errorf("%q decoded %q %v, want %q and no fields", tt.line, msg, kv, tt.msg)
		}
	}
}
