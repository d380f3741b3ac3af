package loopguard

import "unicode/utf8"

// reader decodes the primitive encodings of the binary format over one byte
// slice. It never panics: every read checks the remaining length, and the
// first failure is reported as an error wrapping ErrMalformed. base is the
// offset of buf[0] in the whole module, so that errors name module offsets.
type reader struct {
	buf  []byte
	pos  int
	base int
}

// offset is the module offset of the next byte to read.
func (r *reader) offset() int { return r.base + r.pos }

// eof reports whether every byte has been read.
func (r *reader) eof() bool { return r.pos >= len(r.buf) }

func (r *reader) errorf(format string, args ...any) error {
	return malformedAt(r.offset(), format, args...)
}

func (r *reader) byte() (byte, error) {
	if r.pos >= len(r.buf) {
		return 0, r.errorf("unexpected end of input")
	}
	b := r.buf[r.pos]
	r.pos++
	return b, nil
}

// bytes returns the next n bytes without copying them.
func (r *reader) bytes(n uint64) ([]byte, error) {
	if n > uint64(len(r.buf)-r.pos) {
		return nil, r.errorf("length %d runs past the end of input", n)
	}
	b := r.buf[r.pos : r.pos+int(n)]
	r.pos += int(n)
	return b, nil
}

// skip advances past n bytes.
func (r *reader) skip(n int) error {
	_, err := r.bytes(uint64(n))
	return err
}

// u32 reads an unsigned LEB128 of at most 32 bits (at most 5 bytes, and the
// unused high bits of the last byte must be zero, as the WebAssembly binary
// format requires).
func (r *reader) u32() (uint32, error) {
	// Fast path: most immediates (local and label indices) fit one byte.
	if r.pos < len(r.buf) && r.buf[r.pos] < 0x80 {
		r.pos++
		return uint32(r.buf[r.pos-1]), nil
	}
	v, err := r.uleb(32)
	return uint32(v), err
}

// u64 reads an unsigned LEB128 of at most 64 bits.
func (r *reader) u64() (uint64, error) { return r.uleb(64) }

func (r *reader) uleb(bits uint) (uint64, error) {
	var v uint64
	for shift := uint(0); ; shift += 7 {
		b, err := r.byte()
		if err != nil {
			return 0, err
		}
		if shift+7 >= bits && b&0x80 == 0 {
			// Last possible byte: the bits beyond the width must be zero.
			if extra := bits - shift; extra < 7 && b>>extra != 0 {
				return 0, r.errorf("unsigned LEB128 overflows %d bits", bits)
			}
		}
		v |= uint64(b&0x7f) << shift
		if b&0x80 == 0 {
			return v, nil
		}
		if shift+7 >= bits {
			return 0, r.errorf("unsigned LEB128 longer than %d bits", bits)
		}
	}
}

// s32 reads a signed LEB128 of at most 32 bits.
func (r *reader) s32() (int32, error) {
	v, err := r.sleb(32)
	return int32(v), err
}

// s33 reads a signed LEB128 of at most 33 bits: the encoding of block types.
func (r *reader) s33() (int64, error) { return r.sleb(33) }

// s64 reads a signed LEB128 of at most 64 bits.
func (r *reader) s64() (int64, error) { return r.sleb(64) }

func (r *reader) sleb(bits uint) (int64, error) {
	var v int64
	for shift := uint(0); ; shift += 7 {
		b, err := r.byte()
		if err != nil {
			return 0, err
		}
		if b&0x80 == 0 {
			if shift+7 >= bits {
				// Last possible byte: the bits beyond the width are the sign
				// extension and must all equal the sign bit.
				extra := bits - shift // value bits in this byte, 1..7
				high := byte(0x7f) &^ (1<<extra - 1)
				if b&(1<<(extra-1)) == 0 && b&high != 0 || b&(1<<(extra-1)) != 0 && b&high != high {
					return 0, r.errorf("signed LEB128 overflows %d bits", bits)
				}
			}
			v |= int64(b&0x7f) << shift
			if shift+7 < 64 && b&0x40 != 0 {
				v |= -1 << (shift + 7)
			}
			return v, nil
		}
		v |= int64(b&0x7f) << shift
		if shift+7 >= bits {
			return 0, r.errorf("signed LEB128 longer than %d bits", bits)
		}
	}
}

// name reads a length-prefixed UTF-8 name.
func (r *reader) name() (string, error) {
	n, err := r.u32()
	if err != nil {
		return "", err
	}
	b, err := r.bytes(uint64(n))
	if err != nil {
		return "", err
	}
	if !utf8.Valid(b) {
		return "", r.errorf("name is not valid UTF-8")
	}
	return string(b), nil
}

// appendU32 appends v as an unsigned LEB128.
func appendU32(dst []byte, v uint32) []byte {
	for v >= 0x80 {
		dst = append(dst, byte(v)|0x80)
		v >>= 7
	}
	return append(dst, byte(v))
}

// appendS32 appends v as a signed LEB128.
func appendS32(dst []byte, v int32) []byte {
	for {
		b := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && b&0x40 == 0) || (v == -1 && b&0x40 != 0) {
			return append(dst, b)
		}
		dst = append(dst, b|0x80)
	}
}
