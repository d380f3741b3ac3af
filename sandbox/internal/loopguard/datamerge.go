package loopguard

import (
	"cmp"
	"slices"
)

// maxDataGap is the largest run of zeros mergeData writes out to join two
// data segments: bytes in the module that save a segment at each
// instantiation.
const maxDataGap = 4096

// dataSeg is an active data segment of memory 0 at a constant offset.
type dataSeg struct {
	off  uint32
	data []byte
}

// mergeData returns a data section payload equivalent to payload with
// fewer segments, or nil when it leaves the section as it is.
//
// Go's linker splits a module's data at runs of zeros: the Go guests have
// tens of thousands of segments, and wazero evaluates each one's offset
// expression on every instantiation (about 2 ms of the ~3 ms a new instance
// of a Go guest takes, made again each time the pool replaces one). Joining
// neighbours, with the zeros between them written out, keeps what memory
// holds after instantiation exactly as it was, given what mergeData checks:
// every segment is active in memory 0 at an i32.const offset, and no two
// overlap (so the order they are written in does not matter, and a gap
// filled with zeros held zeros). The module must have no
// data count section (memory.init and data.drop, which name segments by
// index, need one). Anything else, it leaves alone.
func mergeData(payload []byte, base int) []byte {
	segs, ok := activeSegments(payload, base)
	if !ok || len(segs) < 2 {
		return nil
	}
	merged := make([]dataSeg, 0, len(segs)/4)
	cur := segs[0]
	var buf []byte // cur's data once something was appended to it
	for _, s := range segs[1:] {
		end := uint64(cur.off) + uint64(len(cur.data))
		if gap := uint64(s.off) - end; gap <= maxDataGap {
			if buf == nil {
				buf = append(make([]byte, 0, len(cur.data)+int(gap)+len(s.data)), cur.data...)
			}
			buf = append(buf, make([]byte, gap)...)
			buf = append(buf, s.data...)
			cur.data = buf
			continue
		}
		merged = append(merged, cur)
		cur, buf = s, nil
	}
	merged = append(merged, cur)
	if len(merged) == len(segs) {
		return nil
	}
	out := appendU32(make([]byte, 0, len(payload)), uint32(len(merged)))
	for _, s := range merged {
		out = append(out, 0, opI32Const)
		out = appendS32(out, int32(s.off))
		out = append(out, opEnd)
		out = appendU32(out, uint32(len(s.data)))
		out = append(out, s.data...)
	}
	return out
}

// activeSegments decodes a data section whose every segment mergeData can
// join, active in memory 0 at an i32.const offset and overlapping no other,
// and returns them by offset. ok is false for any other section.
func activeSegments(payload []byte, base int) (segs []dataSeg, ok bool) {
	r := &reader{buf: payload, base: base}
	n, err := r.u32()
	if err != nil || uint64(n) > uint64(len(payload)) {
		return nil, false
	}
	segs = make([]dataSeg, 0, n)
	for range n {
		flag, err := r.u32()
		if err != nil || flag != 0 {
			return nil, false
		}
		if op, err := r.byte(); err != nil || op != opI32Const {
			return nil, false
		}
		off, err := r.s32()
		if err != nil {
			return nil, false
		}
		if op, err := r.byte(); err != nil || op != opEnd {
			return nil, false
		}
		size, err := r.u32()
		if err != nil {
			return nil, false
		}
		data, err := r.bytes(uint64(size))
		if err != nil {
			return nil, false
		}
		segs = append(segs, dataSeg{off: uint32(off), data: data})
	}
	if !r.eof() {
		return nil, false
	}
	slices.SortStableFunc(segs, func(a, b dataSeg) int { return cmp.Compare(a.off, b.off) })
	var end uint64
	for _, s := range segs {
		if uint64(s.off) < end {
			return nil, false
		}
		end = uint64(s.off) + uint64(len(s.data))
	}
	return segs, true
}

// MergeData returns module with its data segments merged as Rewrite merges
// them (mergeData), for a module that is not rewritten otherwise; module
// itself when there is nothing to merge or it does not decode.
func MergeData(module []byte) []byte {
	secs, err := splitSections(module)
	if err != nil {
		return module
	}
	var data []byte
	at := -1
	for i, s := range secs {
		switch s.id {
		case secDataCount:
			return module
		case secData:
			data, at = mergeData(s.payload, s.offset), i
		}
	}
	if data == nil {
		return module
	}
	out := make([]byte, 0, len(module)+len(data)-len(secs[at].payload))
	out = append(out, wasmHeader[:]...)
	for i, s := range secs {
		if i == at {
			out = appendSection(out, secData, data)
		} else {
			out = append(out, s.raw...)
		}
	}
	return out
}
