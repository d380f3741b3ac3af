package lpcodec

import (
	"encoding/binary"
	"errors"
	"testing"
)

var errBad = errors.New("bad value")

// TestRoundTrip writes one of each field and reads them back in order.
func TestRoundTrip(t *testing.T) {
	var b []byte
	b = binary.AppendUvarint(b, 300)
	b = binary.AppendVarint(b, -7)
	b = append(b, 0xab)
	b = AppendLP(b, "hello")
	b = AppendLP(b, []byte{})
	b = binary.AppendUvarint(b, 2) // a count of two one-byte items
	b = append(b, 1, 2)

	r := NewReader(b, errBad)
	if got := r.Uvarint(); got != 300 {
		t.Errorf("Uvarint = %d", got)
	}
	if got := r.Varint(); got != -7 {
		t.Errorf("Varint = %d", got)
	}
	if got := r.Byte(); got != 0xab {
		t.Errorf("Byte = %#x", got)
	}
	lp := r.LP()
	if string(lp) != "hello" || cap(lp) != len(lp) {
		t.Errorf("LP = %q (cap %d), want hello with no room to append into the next field", lp, cap(lp))
	}
	if got := r.LP(); len(got) != 0 {
		t.Errorf("empty LP = %q", got)
	}
	if n := r.Count(); n != 2 {
		t.Errorf("Count = %d", n)
	}
	r.Byte()
	r.Byte()
	if r.Err != nil || r.Len() != 0 {
		t.Errorf("Err %v, %d bytes left", r.Err, r.Len())
	}
}

// TestFirstBadFieldSticks checks that a field that does not decode sets
// Err to the Reader's error and every later read gives a zero value.
func TestFirstBadFieldSticks(t *testing.T) {
	for name, b := range map[string][]byte{
		"LP longer than the buffer": AppendLP(nil, "hello")[:3],
		"count over the bytes left": binary.AppendUvarint(nil, 1000),
		"truncated varint":          {0x80},
		"empty":                     nil,
	} {
		t.Run(name, func(t *testing.T) {
			r := NewReader(b, errBad)
			switch name {
			case "LP longer than the buffer":
				r.LP()
			case "count over the bytes left":
				r.Count()
			case "truncated varint":
				r.Uvarint()
			default:
				r.Byte()
			}
			if !errors.Is(r.Err, errBad) {
				t.Fatalf("Err = %v, want %v", r.Err, errBad)
			}
			if r.Uvarint() != 0 || r.Varint() != 0 || r.Byte() != 0 || r.LP() != nil || r.Count() != 0 {
				t.Error("a read after the failure returned a value")
			}
		})
	}
}
