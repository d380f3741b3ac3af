package abi

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"math"
	"testing"
)

// goldenLogLines are the lines of testdata/loglines.txt, by name: what
// EncodeLogLine writes for a message and its fields. The Rust SDK's tests
// (guest-sdk/rust/tests/golden.rs) encode the same message and fields and
// check they are the same bytes, so that a Rust handler's fields reach the
// host as a Go handler's do. The values cover what a JSON encoder may
// write differently: escapes (HTML's <>&, U+2028, \b, control bytes),
// floats in and out of exponent form, a NaN and an infinity (JSON cannot
// hold them: fmt.Sprint's text), nested arrays and objects.
func goldenLogLines() []struct {
	name, msg string
	kv        []any
} {
	return []struct {
		name, msg string
		kv        []any
	}{
		{"no fields", "buyer notified", nil},
		{"fields", "buyer notified", []any{"buyer", "buyer-7", "order", "order-7", "attempt", 3, "final", true, "ratio", 1.5, "none", nil}},
		{"escapes", "say \"hi\" <b>&</b>\n\tü\\", []any{"k\u2028\u2029", "\b\f\x01\x1f\x7f€", "tab\there", "x"}},
		{"numbers", "n", []any{"big", 1e21, "small", 1e-7, "edge", 1e-6, "neg", -2.5e-9, "zero", 0, "negzero", math.Copysign(0, -1),
			"huge", 123456789012345680000.0, "nan", math.NaN(), "inf", math.Inf(1), "-inf", math.Inf(-1)}},
		{"nested", "n", []any{"list", []any{1, "a", nil, false}, "obj", map[string]any{"a": 1, "b": "x<y"}}},
	}
}

// TestGoldenLogLines pins EncodeLogLine's bytes to testdata/loglines.txt,
// which the Rust SDK's log line is checked against too (-update rewrites
// it after a deliberate change), and checks each line decodes back to its
// message with as many fields.
func TestGoldenLogLines(t *testing.T) {
	var want bytes.Buffer
	want.WriteString("# log lines: <name>: <hex of the line>, written by abi.EncodeLogLine\n")
	want.WriteString("# (go test ./wasm/abi -run TestGoldenLogLines -update); read by guest-sdk/rust/tests/golden.rs.\n")
	for _, l := range goldenLogLines() {
		fmt.Fprintf(&want, "%s: %s\n", l.name, hex.EncodeToString(EncodeLogLine(l.msg, l.kv)))
	}
	lines := goldenFile(t, "testdata/loglines.txt", want.Bytes())
	for _, l := range goldenLogLines() {
		msg, kv := DecodeLogLine(lines[l.name])
		if msg != l.msg || len(kv) != len(l.kv) {
			t.Errorf("%s decodes to %q with %d fields, want %q with %d", l.name, msg, len(kv), l.msg, len(l.kv))
		}
	}
}
