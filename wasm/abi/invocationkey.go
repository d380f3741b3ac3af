package abi

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// The invocation key names one event for one subscription:
//
//	<subscription>:<aggregateType>/<aggregateId>@<version>:<index>
//
// e.g. "ShipmentNotifier.onOrderShipped:Order/o-1@3:0". The three names are
// escaped so that the separators cannot occur in them: '%', ':', '@', '/'
// and every byte outside printable ASCII (space, control characters, DEL and
// the bytes of non-ASCII UTF-8) are written as '%' and two upper-case hex
// digits, every other byte as itself. So the key is printable ASCII (fit for
// an HTTP header and a log line), an id without such bytes reads as itself,
// and two different (subscription, type, id, version, index) tuples never
// give the same key: ParseInvocationKey takes a key apart again.

// InvocationKey returns the key of event index of the commit of aggregate
// (aggregateType, aggregateID) at version, for subscription
// ("Processor.handler"); index is not negative.
func InvocationKey(subscription, aggregateType, aggregateID string, version uint64, index int) string {
	var num [40]byte
	ver := strconv.AppendUint(num[:0], version, 10)
	idx := strconv.AppendInt(num[len(ver):len(ver)], int64(index), 10)
	var b strings.Builder // one allocation: the key's exact length
	ns, nt, ni := escapedLen(subscription), escapedLen(aggregateType), escapedLen(aggregateID)
	b.Grow(ns + nt + ni + 4 + len(ver) + len(idx))
	writeEscaped(&b, subscription, ns)
	b.WriteByte(':')
	writeEscaped(&b, aggregateType, nt)
	b.WriteByte('/')
	writeEscaped(&b, aggregateID, ni)
	b.WriteByte('@')
	b.Write(ver)
	b.WriteByte(':')
	b.Write(idx)
	return b.String()
}

// KeyParts are the parts of an invocation key.
type KeyParts struct {
	Subscription  string
	AggregateType string
	AggregateID   string
	Version       uint64
	Index         int
}

// ErrBadInvocationKey is wrapped by ParseInvocationKey's errors.
var ErrBadInvocationKey = errors.New("abi: not an invocation key")

// ParseInvocationKey takes a key made by InvocationKey apart. It accepts
// exactly the keys InvocationKey makes (escapes upper-case, only where
// needed; numbers without leading zeros), so that each tuple has one key.
func ParseInvocationKey(key string) (KeyParts, error) {
	var p KeyParts
	bad := func(why string) (KeyParts, error) {
		return KeyParts{}, fmt.Errorf("%w: %q: %s", ErrBadInvocationKey, key, why)
	}
	sub, rest, ok := strings.Cut(key, ":")
	if !ok {
		return bad("no ':' after the subscription")
	}
	typ, rest, ok := strings.Cut(rest, "/")
	if !ok {
		return bad("no '/' after the aggregate type")
	}
	id, rest, ok := strings.Cut(rest, "@")
	if !ok {
		return bad("no '@' after the aggregate id")
	}
	ver, idx, ok := strings.Cut(rest, ":")
	if !ok {
		return bad("no ':' after the version")
	}
	var err error
	if p.Subscription, err = unescape(sub); err != nil {
		return bad("subscription: " + err.Error())
	}
	if p.AggregateType, err = unescape(typ); err != nil {
		return bad("aggregate type: " + err.Error())
	}
	if p.AggregateID, err = unescape(id); err != nil {
		return bad("aggregate id: " + err.Error())
	}
	if !canonicalNumber(ver) || !canonicalNumber(idx) {
		return bad("version and index must be decimal numbers without leading zeros")
	}
	if p.Version, err = strconv.ParseUint(ver, 10, 64); err != nil {
		return bad("version: " + err.Error())
	}
	i, err := strconv.ParseInt(idx, 10, 0)
	if err != nil {
		return bad("index: " + err.Error())
	}
	p.Index = int(i)
	return p, nil
}

// The bytes below 128 that are escaped, as bit sets: escLow for 0–63 (the
// controls, space, '%', '/', ':'), escHigh for 64–127 ('@', DEL).
const (
	escLow  uint64 = 1<<'!' - 1 | 1<<'%' | 1<<'/' | 1<<':'
	escHigh uint64 = 1<<('@'-64) | 1<<(0x7f-64)
)

// mustEscape reports whether c is written as %XX in a key's names.
func mustEscape(c byte) bool {
	switch {
	case c < 64:
		return escLow>>c&1 != 0
	case c < 128:
		return escHigh>>(c-64)&1 != 0
	}
	return true
}

// escapedLen is the length of s escaped.
func escapedLen(s string) int {
	n := len(s)
	for i := 0; i < len(s); i++ {
		if mustEscape(s[i]) {
			n += 2
		}
	}
	return n
}

const upperHex = "0123456789ABCDEF"

// writeEscaped writes s escaped (n bytes, its escapedLen), in runs of bytes
// that need no escape.
func writeEscaped(b *strings.Builder, s string, n int) {
	if n == len(s) {
		b.WriteString(s)
		return
	}
	start := 0
	for i := 0; i < len(s); i++ {
		if c := s[i]; mustEscape(c) {
			b.WriteString(s[start:i])
			b.WriteByte('%')
			b.WriteByte(upperHex[c>>4])
			b.WriteByte(upperHex[c&15])
			start = i + 1
		}
	}
	b.WriteString(s[start:])
}

// unescape reverses writeEscaped, refusing anything it would not write.
func unescape(s string) (string, error) {
	if !strings.Contains(s, "%") {
		for i := 0; i < len(s); i++ {
			if mustEscape(s[i]) {
				return "", fmt.Errorf("byte %#02x must be escaped", s[i])
			}
		}
		return s, nil
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '%' {
			if mustEscape(c) {
				return "", fmt.Errorf("byte %#02x must be escaped", c)
			}
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(s) {
			return "", errors.New("'%' is not followed by two hex digits")
		}
		hi, lo := strings.IndexByte(upperHex, s[i+1]), strings.IndexByte(upperHex, s[i+2])
		if hi < 0 || lo < 0 {
			return "", errors.New("'%' is not followed by two upper-case hex digits")
		}
		d := byte(hi<<4 | lo)
		if !mustEscape(d) {
			return "", fmt.Errorf("%q escapes a byte that is written as itself", s[i:i+3])
		}
		b.WriteByte(d)
		i += 2
	}
	return b.String(), nil
}

// canonicalNumber reports whether s is a decimal number as strconv writes it.
func canonicalNumber(s string) bool {
	if s == "" || (len(s) > 1 && s[0] == '0') {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
