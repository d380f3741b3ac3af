package abi

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"
)

// ErrTruncated is returned when a message ends before a field it announces.
var ErrTruncated = errors.New("abi: message truncated")

// MaxFieldLen bounds any single length-prefixed field (16 MiB), so that a
// corrupt length can never make a decoder allocate more than the input holds.
const MaxFieldLen = 16 << 20

// Encoder appends fields to a byte slice. Integers are unsigned LEB128
// varints (signed ones zig-zag encoded), strings and byte fields are a varint
// length followed by the bytes. The zero Encoder is ready to use.
type Encoder struct{ buf []byte }

// NewEncoder returns an encoder that appends to buf[:0].
func NewEncoder(buf []byte) *Encoder { return &Encoder{buf: buf[:0]} }

// Bytes returns the encoded message.
func (e *Encoder) Bytes() []byte { return e.buf }

// Uint appends an unsigned varint.
func (e *Encoder) Uint(v uint64) { e.buf = binary.AppendUvarint(e.buf, v) }

// Int appends a zig-zag signed varint.
func (e *Encoder) Int(v int64) { e.buf = binary.AppendVarint(e.buf, v) }

// Bool appends 0 or 1.
func (e *Encoder) Bool(v bool) {
	if v {
		e.buf = append(e.buf, 1)
	} else {
		e.buf = append(e.buf, 0)
	}
}

// String appends a length-prefixed string.
func (e *Encoder) String(s string) {
	e.Uint(uint64(len(s)))
	e.buf = append(e.buf, s...)
}

// Blob appends a length-prefixed byte field.
func (e *Encoder) Blob(b []byte) {
	e.Uint(uint64(len(b)))
	e.buf = append(e.buf, b...)
}

// Strings appends a count followed by each string.
func (e *Encoder) Strings(ss []string) {
	e.Uint(uint64(len(ss)))
	for _, s := range ss {
		e.String(s)
	}
}

// Decoder reads fields written by an Encoder. The first error sticks: every
// later read returns a zero value, and Err reports the error, so callers can
// decode a whole message and check once.
type Decoder struct {
	buf    []byte
	off    int
	err    error
	borrow bool // strings alias buf instead of copying it (BorrowEvent)
}

// NewDecoder returns a decoder over b. Strings it returns are copies; byte
// fields alias b.
func NewDecoder(b []byte) *Decoder { return &Decoder{buf: b} }

// Err returns the first decoding error, if any.
func (d *Decoder) Err() error { return d.err }

// Done returns the first error, or an error if bytes are left over.
func (d *Decoder) Done() error {
	if d.err == nil && d.off != len(d.buf) {
		d.err = fmt.Errorf("abi: %d trailing bytes", len(d.buf)-d.off)
	}
	return d.err
}

func (d *Decoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
}

// Uint reads an unsigned varint.
func (d *Decoder) Uint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.buf[d.off:])
	if n <= 0 {
		d.fail(ErrTruncated)
		return 0
	}
	d.off += n
	return v
}

// Int reads a zig-zag signed varint.
func (d *Decoder) Int() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.buf[d.off:])
	if n <= 0 {
		d.fail(ErrTruncated)
		return 0
	}
	d.off += n
	return v
}

// Uint32 reads an unsigned varint that must fit 32 bits.
func (d *Decoder) Uint32() uint32 {
	v := d.Uint()
	if v > 1<<32-1 {
		d.fail(fmt.Errorf("abi: value %d overflows 32 bits", v))
		return 0
	}
	return uint32(v)
}

// Byte reads an unsigned varint that must fit 8 bits.
func (d *Decoder) Byte() uint8 {
	v := d.Uint()
	if v > 255 {
		d.fail(fmt.Errorf("abi: value %d overflows 8 bits", v))
		return 0
	}
	return uint8(v)
}

// Bool reads a boolean.
func (d *Decoder) Bool() bool {
	switch d.Uint() {
	case 0:
		return false
	case 1:
		return true
	default:
		d.fail(errors.New("abi: bad boolean"))
		return false
	}
}

func (d *Decoder) field() []byte {
	n := d.Uint()
	if d.err != nil {
		return nil
	}
	if n > MaxFieldLen || n > uint64(len(d.buf)-d.off) {
		d.fail(ErrTruncated)
		return nil
	}
	b := d.buf[d.off : d.off+int(n)]
	d.off += int(n)
	return b
}

// String reads a length-prefixed string.
func (d *Decoder) String() string {
	f := d.field()
	if d.borrow {
		return unsafe.String(unsafe.SliceData(f), len(f))
	}
	return string(f)
}

// Blob reads a length-prefixed byte field; the result aliases the input.
func (d *Decoder) Blob() []byte {
	b := d.field()
	if len(b) == 0 {
		return nil
	}
	return b
}

// Strings reads a count followed by that many strings.
func (d *Decoder) Strings() []string {
	n := d.count()
	if n == 0 {
		return nil
	}
	ss := make([]string, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		ss = append(ss, d.String())
	}
	return ss
}

// count reads a collection length; each element takes at least one byte, so
// a count larger than the bytes left is corrupt.
func (d *Decoder) count() int {
	n := d.Uint()
	if d.err != nil {
		return 0
	}
	if n > uint64(len(d.buf)-d.off) {
		d.fail(ErrTruncated)
		return 0
	}
	return int(n)
}
