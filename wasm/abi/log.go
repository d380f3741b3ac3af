package abi

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// LogFieldsMark, as the first byte of a log line (ASCII record separator,
// which no text line begins with), says the line carries structured
// fields: the rest is a JSON object {"msg": "…", "kv": [key, value, …]},
// the keys strings and the values any JSON value, in the guest's order.
// The host logs the message with the fields as fields. A line without the
// mark is all message.
const LogFieldsMark = 0x1e

type logLine struct {
	Msg string `json:"msg"`
	KV  []any  `json:"kv"`
}

// EncodeLogLine returns the log line of msg with kv, key-value pairs as
// slog takes them (a key is rendered with fmt.Sprint; a value that is an
// error or a fmt.Stringer by its text; one JSON cannot hold by fmt.Sprint).
// No pairs: the line is msg itself.
func EncodeLogLine(msg string, kv []any) []byte {
	if len(kv) < 2 {
		return []byte(msg)
	}
	l := logLine{Msg: msg, KV: make([]any, 0, len(kv)&^1)}
	for i := 0; i+1 < len(kv); i += 2 {
		v := kv[i+1]
		switch x := v.(type) {
		case error:
			v = x.Error()
		case fmt.Stringer:
			v = x.String()
		default:
			if _, err := json.Marshal(v); err != nil {
				v = fmt.Sprint(v)
			}
		}
		l.KV = append(l.KV, fmt.Sprint(kv[i]), v)
	}
	b, err := json.Marshal(l)
	if err != nil {
		return []byte(msg)
	}
	return append([]byte{LogFieldsMark}, b...)
}

// DecodeLogLine returns a log line's message and its fields as key-value
// pairs (numbers as int64 when whole, else float64). A line without
// LogFieldsMark, or whose fields do not decode (cut short by the host's
// limit, say), is all message, the mark dropped.
func DecodeLogLine(b []byte) (msg string, kv []any) {
	if len(b) == 0 || b[0] != LogFieldsMark {
		return string(b), nil
	}
	d := json.NewDecoder(bytes.NewReader(b[1:]))
	d.UseNumber()
	var l logLine
	if err := d.Decode(&l); err != nil || len(l.KV)%2 != 0 {
		return string(b[1:]), nil
	}
	for i := 0; i < len(l.KV); i += 2 {
		k, ok := l.KV[i].(string)
		if !ok {
			return string(b[1:]), nil
		}
		v := l.KV[i+1]
		if n, ok := v.(json.Number); ok {
			if x, err := n.Int64(); err == nil {
				v = x
			} else if f, err := n.Float64(); err == nil {
				v = f
			}
		}
		kv = append(kv, k, v)
	}
	return l.Msg, kv
}
