package loopguard

import "fmt"

// Opcodes the rewriter emits or must recognise by name.
const (
	opBlock        = 0x02
	opLoop         = 0x03
	opIf           = 0x04
	opElse         = 0x05
	opEnd          = 0x0b
	opCall         = 0x10
	opDrop         = 0x1a
	opGlobalGet    = 0x23
	opGlobalSet    = 0x24
	opI32Const     = 0x41
	opI32Eqz       = 0x45
	opI32Sub       = 0x6b
	opPrefixFC     = 0xfc
	blockTypeEmpty = 0x40
)

// walkExpr decodes one expression (a function body after its locals, or a
// constant expression) up to and including the end that closes it, decoding
// every immediate so that no immediate byte is ever taken for an opcode. For
// every loop instruction it appends to loops the position in r.buf just past
// the loop's block type: the start of the loop body, where the guard goes.
//
// fn is the function index for error messages, or -1 for a constant
// expression. numTypes bounds the type indices of multi-value block types.
func walkExpr(r *reader, numTypes uint32, fn int, loops []int) ([]int, error) {
	depth := 0
	for {
		at := r.offset()
		op, err := r.byte()
		if err != nil {
			return loops, inFunc(fn, err)
		}
		switch {
		case op == opEnd:
			if depth == 0 {
				return loops, nil
			}
			depth--
		case op == opBlock || op == opLoop || op == opIf:
			if err := r.blockType(numTypes); err != nil {
				return loops, inFunc(fn, err)
			}
			depth++
			if op == opLoop {
				loops = append(loops, r.pos)
			}
		case op == opElse:
			if depth == 0 {
				return loops, inFunc(fn, malformedAt(at, "else outside if"))
			}
		default:
			if err := r.immediates(op, at, fn); err != nil {
				return loops, inFunc(fn, err)
			}
		}
	}
}

// blockType reads a block type: empty (0x40), one value type, or a type
// index encoded as a non-negative s33 (multi-value).
func (r *reader) blockType(numTypes uint32) error {
	if r.pos < len(r.buf) {
		if b := r.buf[r.pos]; b == blockTypeEmpty || isValType(b) {
			r.pos++
			return nil
		}
	}
	at := r.offset()
	v, err := r.s33()
	if err != nil {
		return err
	}
	if v < 0 {
		return unsupportedAt(at, "block type %d (GC and typed references are not supported)", v)
	}
	if v >= int64(numTypes) {
		return malformedAt(at, "block type index %d out of range (%d types)", v, numTypes)
	}
	return nil
}

// unsupported builds the error for an opcode the rewriter refuses.
func unsupported(op string, family string, at int) error {
	return unsupportedAt(at, "unsupported opcode %s (%s)", op, family)
}

// immediates skips the immediates of every opcode other than the structured
// control instructions, which walkExpr handles. at is the module offset of op.
func (r *reader) immediates(op byte, at, fn int) error {
	var err error
	// Cases are ordered by how often Go-compiled code uses them.
	switch {
	case op >= 0x20 && op <= 0x26: // local.*, global.*, table.get, table.set
		_, err = r.u32()
	case op >= 0x45 && op <= 0xc4: // numeric (MVP) and sign extension: no immediates
	case op >= 0x28 && op <= 0x3e: // loads and stores: memarg
		err = r.memarg()
	case op == opI32Const:
		_, err = r.s32()
	case op == 0x42: // i64.const
		_, err = r.s64()
	case op == 0x0c, op == 0x0d, op == 0x10, op == 0x12: // br, br_if, call, return_call
		_, err = r.u32()
	case op <= 0x01, op == 0x0f, op == 0x1a, op == 0x1b: // unreachable, nop, return, drop, select
	case op == 0x0e: // br_table: vec(labelidx) labelidx
		var n uint32
		if n, err = r.u32(); err != nil {
			return err
		}
		for i := uint64(0); i <= uint64(n) && err == nil; i++ {
			_, err = r.u32()
		}
	case op == 0x11, op == 0x13: // call_indirect, return_call_indirect: typeidx tableidx
		if _, err = r.u32(); err == nil {
			_, err = r.u32()
		}
	case op == 0x1c: // select t*
		var n uint32
		if n, err = r.u32(); err != nil {
			return err
		}
		for i := uint32(0); i < n && err == nil; i++ {
			_, err = r.valType()
		}
	case op == 0x3f, op == 0x40: // memory.size, memory.grow: memidx
		_, err = r.u32()
	case op == 0x43: // f32.const
		err = r.skip(4)
	case op == 0x44: // f64.const
		err = r.skip(8)
	case op == 0xd0: // ref.null t
		err = r.refType()
	case op == 0xd1: // ref.is_null
	case op == 0xd2: // ref.func
		_, err = r.u32()
	case op == opPrefixFC:
		err = r.prefixFC(at)
	case op == 0xfd:
		return unsupported("0xfd", "SIMD", at)
	case op == 0xfe:
		return unsupported("0xfe", "threads", at)
	case op >= 0x06 && op <= 0x0a, op == 0x18, op == 0x19, op == 0x1f:
		return unsupported(fmt.Sprintf("%#x", op), "exception handling", at)
	case op == 0x14, op == 0x15, op >= 0xd3 && op <= 0xd6:
		return unsupported(fmt.Sprintf("%#x", op), "typed function references", at)
	case op == 0xfb:
		return unsupported("0xfb", "GC", at)
	default:
		return unsupported(fmt.Sprintf("%#x", op), "unknown", at)
	}
	return err
}

// memarg reads a memory argument. Bit 6 of the alignment announces a memory
// index (multi-memory); the offset is read as u64 (memory64), a superset of
// the u32 offset, leaving range checks to the validator.
func (r *reader) memarg() error {
	align, err := r.u32()
	if err != nil {
		return err
	}
	if align&0x40 != 0 {
		if _, err := r.u32(); err != nil {
			return err
		}
	}
	_, err = r.u64()
	return err
}

// prefixFC skips the sub-opcode and immediates of a 0xfc instruction:
// saturating truncation, bulk memory and table instructions.
func (r *reader) prefixFC(at int) error {
	sub, err := r.u32()
	if err != nil {
		return err
	}
	var n int // u32 immediates after the sub-opcode
	switch {
	case sub <= 7: // i32/i64.trunc_sat_f32/f64_s/u
	case sub == 8: // memory.init dataidx memidx
		n = 2
	case sub == 9: // data.drop dataidx
		n = 1
	case sub == 10: // memory.copy memidx memidx
		n = 2
	case sub == 11: // memory.fill memidx
		n = 1
	case sub == 12: // table.init elemidx tableidx
		n = 2
	case sub == 13: // elem.drop elemidx
		n = 1
	case sub == 14: // table.copy tableidx tableidx
		n = 2
	case sub >= 15 && sub <= 17: // table.grow, table.size, table.fill: tableidx
		n = 1
	default:
		return unsupported(fmt.Sprintf("0xfc %d", sub), "unknown 0xfc instruction", at)
	}
	for range n {
		if _, err := r.u32(); err != nil {
			return err
		}
	}
	return nil
}
