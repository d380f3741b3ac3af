package loopguard

import (
	"bytes"
	"fmt"
	"strings"
)

// Section ids of the binary format (core spec 2.0, plus the tag section of
// the exception-handling proposal so that its place in the order is known).
const (
	secCustom    = 0
	secType      = 1
	secImport    = 2
	secFunction  = 3
	secTable     = 4
	secMemory    = 5
	secGlobal    = 6
	secExport    = 7
	secStart     = 8
	secElement   = 9
	secCode      = 10
	secData      = 11
	secDataCount = 12
	secTag       = 13
)

// sectionRank gives the position a non-custom section must take in a module:
// sections must appear in this order, at most once each. The ids are not in
// order themselves (data count, 12, comes before code, 10). ok is false for an
// id the rewriter does not know.
func sectionRank(id byte) (rank int, ok bool) {
	switch id {
	case secType, secImport, secFunction, secTable, secMemory:
		return int(id), true
	case secTag:
		return 6, true
	case secGlobal, secExport, secStart, secElement:
		return int(id) + 1, true
	case secDataCount:
		return 11, true
	case secCode:
		return 12, true
	case secData:
		return 13, true
	}
	return 0, false
}

// wasmHeader is the magic number and version 1 of the binary format.
var wasmHeader = [8]byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00}

// section is one section of a module: its raw bytes and its payload.
type section struct {
	id      byte
	raw     []byte // id, size and payload, exactly as in the input
	payload []byte
	offset  int    // module offset of the payload, for error messages
	name    string // custom sections only
}

// splitSections checks the header and section order and returns the
// sections, each still pointing into module.
func splitSections(module []byte) ([]section, error) {
	if len(module) < len(wasmHeader) {
		return nil, malformedAt(-1, "%d bytes is too short for a module header", len(module))
	}
	if !bytes.Equal(module[:4], wasmHeader[:4]) {
		return nil, malformedAt(0, "not a WebAssembly module (bad magic %x)", module[:4])
	}
	if !bytes.Equal(module[4:8], wasmHeader[4:]) {
		return nil, malformedAt(4, "unsupported binary version %x (want 1; components are not modules)", module[4:8])
	}
	r := &reader{buf: module, pos: len(wasmHeader)}
	var secs []section
	lastRank := 0
	for !r.eof() {
		start := r.pos
		id, _ := r.byte()
		size, err := r.u32()
		if err != nil {
			return nil, err
		}
		off := r.offset()
		payload, err := r.bytes(uint64(size))
		if err != nil {
			return nil, err
		}
		s := section{id: id, raw: module[start:r.pos], payload: payload, offset: off}
		if id == secCustom {
			nr := &reader{buf: payload, base: off}
			if s.name, err = nr.name(); err != nil {
				return nil, err
			}
		} else {
			rank, ok := sectionRank(id)
			if !ok {
				return nil, malformedAt(start, "unknown section id %d", id)
			}
			if rank <= lastRank {
				return nil, malformedAt(start, "section id %d is out of order or repeated", id)
			}
			lastRank = rank
		}
		secs = append(secs, s)
	}
	return secs, nil
}

// offsetDependent reports whether a custom section describes code by byte
// offset, so that it would be wrong after the code section is rewritten.
// DWARF (.debug_*), source maps and relocations (reloc.*, only in object
// files) are dropped; name, producers, target_features and the rest do not
// mention code offsets and are kept.
func offsetDependent(name string) bool {
	return strings.HasPrefix(name, ".debug_") || name == "sourceMappingURL" || strings.HasPrefix(name, "reloc.")
}

// Value types of the binary format that the rewriter can read.
const (
	valI32       = 0x7f
	valI64       = 0x7e
	valF32       = 0x7d
	valF64       = 0x7c
	valV128      = 0x7b
	valFuncref   = 0x70
	valExternref = 0x6f
)

func isValType(b byte) bool {
	switch b {
	case valI32, valI64, valF32, valF64, valV128, valFuncref, valExternref:
		return true
	}
	return false
}

func (r *reader) valType() (byte, error) {
	b, err := r.byte()
	if err != nil {
		return 0, err
	}
	if !isValType(b) {
		r.pos--
		return 0, unsupportedAt(r.offset(), "value type %#x (GC and typed references are not supported)", b)
	}
	return b, nil
}

func (r *reader) refType() error {
	b, err := r.valType()
	if err != nil {
		return err
	}
	if b != valFuncref && b != valExternref {
		return r.errorf("%#x is not a reference type", b)
	}
	return nil
}

// limits reads table or memory limits. Flags 2 and 3 (shared, threads) and
// 4 to 7 (64-bit, memory64) only change what the limits mean, not how they
// are laid out beyond the LEB128 width, which u64 covers.
func (r *reader) limits() error {
	flags, err := r.byte()
	if err != nil {
		return err
	}
	if flags > 7 {
		return r.errorf("unknown limits flags %#x", flags)
	}
	if _, err := r.u64(); err != nil {
		return err
	}
	if flags&1 != 0 {
		_, err = r.u64()
	}
	return err
}

// funcType is the part of a function type the rewriter needs.
type funcType struct {
	params, results []byte
}

// parseTypes reads the type section.
func parseTypes(s section) ([]funcType, error) {
	r := &reader{buf: s.payload, base: s.offset}
	n, err := r.u32()
	if err != nil {
		return nil, err
	}
	var types []funcType
	for range n {
		form, err := r.byte()
		if err != nil {
			return nil, err
		}
		if form != 0x60 {
			return nil, unsupportedAt(r.offset()-1, "type form %#x is not a function type (GC types are not supported)", form)
		}
		var ft funcType
		for _, dst := range []*[]byte{&ft.params, &ft.results} {
			c, err := r.u32()
			if err != nil {
				return nil, err
			}
			start := r.pos
			for range c {
				if _, err := r.valType(); err != nil {
					return nil, err
				}
			}
			*dst = r.buf[start:r.pos]
		}
		types = append(types, ft)
	}
	if !r.eof() {
		return nil, r.errorf("trailing bytes in type section")
	}
	return types, nil
}

// importInfo is what the rewriter needs from the import section.
type importInfo struct {
	funcs   uint32 // imported functions: they come first in the function index space
	globals uint32 // imported globals: they come first in the global index space
	yield   uint32 // function index of wasi_snapshot_preview1.sched_yield
	found   bool   // whether yield is set
}

// parseImports reads the import section and finds the first function import
// wasi_snapshot_preview1.sched_yield of type () -> i32.
func parseImports(s section, types []funcType) (importInfo, error) {
	var info importInfo
	r := &reader{buf: s.payload, base: s.offset}
	n, err := r.u32()
	if err != nil {
		return info, err
	}
	for range n {
		mod, err := r.name()
		if err != nil {
			return info, err
		}
		field, err := r.name()
		if err != nil {
			return info, err
		}
		kind, err := r.byte()
		if err != nil {
			return info, err
		}
		switch kind {
		case 0x00: // function
			ti, err := r.u32()
			if err != nil {
				return info, err
			}
			if ti >= uint32(len(types)) {
				return info, r.errorf("import %s.%s uses type %d of %d", mod, field, ti, len(types))
			}
			if !info.found && mod == "wasi_snapshot_preview1" && field == "sched_yield" {
				t := types[ti]
				if len(t.params) != 0 || len(t.results) != 1 || t.results[0] != valI32 {
					return info, fmt.Errorf("%w: it is imported with another type", ErrNoYieldImport)
				}
				info.yield, info.found = info.funcs, true
			}
			info.funcs++
		case 0x01: // table
			if err := r.refType(); err != nil {
				return info, err
			}
			if err := r.limits(); err != nil {
				return info, err
			}
		case 0x02: // memory
			if err := r.limits(); err != nil {
				return info, err
			}
		case 0x03: // global
			if _, err := r.valType(); err != nil {
				return info, err
			}
			if _, err := r.mutability(); err != nil {
				return info, err
			}
			info.globals++
		default:
			return info, unsupportedAt(r.offset()-1, "import kind %#x (tags need exception handling)", kind)
		}
	}
	if !r.eof() {
		return info, r.errorf("trailing bytes in import section")
	}
	return info, nil
}

func (r *reader) mutability() (byte, error) {
	m, err := r.byte()
	if err != nil {
		return 0, err
	}
	if m > 1 {
		return 0, r.errorf("bad global mutability %#x", m)
	}
	return m, nil
}

// countOnly reads the vector length that starts a section payload: the
// number of functions declared by the function section.
func countOnly(s section) (uint32, error) {
	r := &reader{buf: s.payload, base: s.offset}
	return r.u32()
}

// appendGlobal returns a global section payload holding the globals of
// payload (nil if the module has none) followed by one mutable i32 global
// initialised to init, and the number of globals the section defined before.
// Existing globals are validated by decoding them, then copied unchanged.
func appendGlobal(s *section, init int32, numTypes uint32) (out []byte, before uint32, err error) {
	var rest []byte
	if s != nil {
		r := &reader{buf: s.payload, base: s.offset}
		if before, err = r.u32(); err != nil {
			return nil, 0, err
		}
		start := r.pos
		for range before {
			if _, err := r.valType(); err != nil {
				return nil, 0, err
			}
			if _, err := r.mutability(); err != nil {
				return nil, 0, err
			}
			if _, err := walkExpr(r, numTypes, -1, nil); err != nil {
				return nil, 0, err
			}
		}
		if !r.eof() {
			return nil, 0, r.errorf("trailing bytes in global section")
		}
		rest = r.buf[start:]
	}
	if before == 1<<32-1 {
		return nil, 0, malformedAt(-1, "global section is full")
	}
	out = appendU32(make([]byte, 0, len(rest)+16), before+1)
	out = append(out, rest...)
	out = append(out, valI32, 0x01, opI32Const)
	out = appendS32(out, init)
	out = append(out, opEnd)
	return out, before, nil
}

// appendSection appends a section with the given id and payload.
func appendSection(dst []byte, id byte, payload []byte) []byte {
	dst = append(dst, id)
	dst = appendU32(dst, uint32(len(payload)))
	return append(dst, payload...)
}
