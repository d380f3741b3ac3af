package loopguard

import (
	"errors"
	"math"
	"testing"
)

func TestLEB128(t *testing.T) {
	for _, v := range []uint32{0, 1, 63, 64, 127, 128, 1 << 14, math.MaxUint32} {
		r := &reader{buf: appendU32(nil, v)}
		if got, err := r.u32(); err != nil || got != v || !r.eof() {
			t.Errorf("u32 %d: got %d, %v", v, got, err)
		}
	}
	for _, v := range []int32{0, 1, -1, 63, 64, -64, -65, 10_000, math.MaxInt32, math.MinInt32} {
		r := &reader{buf: appendS32(nil, v)}
		if got, err := r.s32(); err != nil || got != v || !r.eof() {
			t.Errorf("s32 %d: got %d, %v", v, got, err)
		}
	}
	tests := []struct {
		name string
		in   []byte
		read func(*reader) (int64, error)
		want int64
		ok   bool
	}{
		{"u32 max", []byte{0xff, 0xff, 0xff, 0xff, 0x0f}, u32of, math.MaxUint32, true},
		{"u32 overflow", []byte{0xff, 0xff, 0xff, 0xff, 0x1f}, u32of, 0, false},
		{"u32 too long", []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x00}, u32of, 0, false},
		{"u32 padded", []byte{0x80, 0x80, 0x00}, u32of, 0, true},
		{"s32 min", []byte{0x80, 0x80, 0x80, 0x80, 0x78}, s32of, math.MinInt32, true},
		{"s32 bad sign", []byte{0x80, 0x80, 0x80, 0x80, 0x70}, s32of, 0, false},
		{"s32 positive overflow", []byte{0xff, 0xff, 0xff, 0xff, 0x0f}, s32of, 0, false},
		{"s33 type index", []byte{0x80, 0x80, 0x80, 0x80, 0x0f}, s33of, 1<<32 - 1<<28 + 0, true},
		{"s33 -1", []byte{0x7f}, s33of, -1, true},
		{"s64 min", []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x7f}, s64of, math.MinInt64, true},
		{"s64 bad", []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, s64of, 0, false},
		{"u64 max", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, u64of, -1, true},
		{"u64 overflow", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x03}, u64of, 0, false},
		{"truncated", []byte{0x80}, u32of, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.read(&reader{buf: tt.in})
			if tt.ok && (err != nil || got != tt.want) {
				t.Fatalf("got %d, %v; want %d", got, err, tt.want)
			}
			if !tt.ok && !errors.Is(err, ErrMalformed) {
				t.Fatalf("got %d, %v; want ErrMalformed", got, err)
			}
		})
	}
}

func u32of(r *reader) (int64, error) { v, err := r.u32(); return int64(v), err }
func u64of(r *reader) (int64, error) { v, err := r.u64(); return int64(v), err }
func s32of(r *reader) (int64, error) { v, err := r.s32(); return int64(v), err }
func s33of(r *reader) (int64, error) { return r.s33() }
func s64of(r *reader) (int64, error) { return r.s64() }
