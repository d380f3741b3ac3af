// Package lpcodec is the compact binary form Berth's stores write: uvarints,
// varints, single bytes and length-prefixed byte strings (a uvarint length,
// then the bytes). The event log's commits and the JetStream ledger's
// transaction messages are both written in it; each keeps its own layout.
package lpcodec

import "encoding/binary"

// AppendLP appends s, length-prefixed, to b.
func AppendLP[S ~string | ~[]byte](b []byte, s S) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// Reader reads the fields of one encoded value in order. The first field
// that does not decode sets Err to the error the Reader was made with, and
// every later read returns a zero value: a decoder reads every field, then
// looks at Err once.
type Reader struct {
	b   []byte
	bad error
	// Err is nil while every field read so far decoded.
	Err error
}

// NewReader reads b, failing with bad.
func NewReader(b []byte, bad error) Reader { return Reader{b: b, bad: bad} }

// Len is how many bytes are left unread.
func (r *Reader) Len() int { return len(r.b) }

// Fail sets Err, unless it is set already.
func (r *Reader) Fail() {
	if r.Err == nil {
		r.Err = r.bad
	}
}

// Uvarint reads an unsigned varint.
func (r *Reader) Uvarint() uint64 { return varint(r, binary.Uvarint) }

// Varint reads a signed varint.
func (r *Reader) Varint() int64 { return varint(r, binary.Varint) }

// varint reads one varint with read (binary.Uvarint or binary.Varint).
func varint[T uint64 | int64](r *Reader, read func([]byte) (T, int)) T {
	if r.Err != nil {
		return 0
	}
	v, n := read(r.b)
	if n <= 0 {
		r.Fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

// Byte reads one byte.
func (r *Reader) Byte() byte {
	if r.Err != nil || len(r.b) == 0 {
		r.Fail()
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// LP reads a length-prefixed field as a sub-slice of the buffer, not a copy;
// its capacity is its length, so appending to it never overwrites the next
// field.
func (r *Reader) LP() []byte {
	n := r.Uvarint()
	if r.Err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.Fail()
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

// Count reads a number of items that each take at least one byte, so that
// a corrupt count cannot ask for more items than bytes are left.
func (r *Reader) Count() int {
	n := r.Uvarint()
	if n > uint64(len(r.b)) {
		r.Fail()
		return 0
	}
	return int(n)
}
