package loopguard

// A tiny assembler for hand-made test modules: just enough encoding helpers
// to lay out sections, so tests can state exact bodies.

func u32(v uint32) []byte { return appendU32(nil, v) }

func s32(v int32) []byte { return appendS32(nil, v) }

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// vec is a vector: a count followed by the items.
func vec(items ...[]byte) []byte { return cat(u32(uint32(len(items))), cat(items...)) }

func str(s string) []byte { return cat(u32(uint32(len(s))), []byte(s)) }

func sec(id byte, payload ...[]byte) []byte {
	p := cat(payload...)
	return cat([]byte{id}, u32(uint32(len(p))), p)
}

func custom(name string, data []byte) []byte { return sec(secCustom, str(name), data) }

func functype(params, results []byte) []byte {
	return cat([]byte{0x60}, vec(bytesOf(params)...), vec(bytesOf(results)...))
}

func bytesOf(b []byte) [][]byte {
	out := make([][]byte, len(b))
	for i := range b {
		out[i] = b[i : i+1]
	}
	return out
}

func importFunc(mod, name string, typ uint32) []byte {
	return cat(str(mod), str(name), []byte{0x00}, u32(typ))
}

func importGlobal(mod, name string, vt byte, mut byte) []byte {
	return cat(str(mod), str(name), []byte{0x03, vt, mut})
}

func exportFunc(name string, idx uint32) []byte { return cat(str(name), []byte{0x00}, u32(idx)) }

// body is a function body: local declarations then code, which must end
// with its own end opcode.
func body(locals [][]byte, code ...[]byte) []byte {
	b := cat(vec(locals...), cat(code...))
	return cat(u32(uint32(len(b))), b)
}

func module(sections ...[]byte) []byte { return cat(wasmHeader[:], cat(sections...)) }

// yieldTypes is a type section shared by the hand-made modules:
//
//	0: () -> i32      (sched_yield)
//	1: (i32) -> i32   (the exported loops)
//	2: (i32) -> (i32) (a loop block type with a parameter: multi-value)
var yieldTypes = sec(secType, vec(
	functype(nil, []byte{valI32}),
	functype([]byte{valI32}, []byte{valI32}),
	functype([]byte{valI32}, []byte{valI32}),
))

// countBody is func (n i32) -> i32 { i := 0; for i < n { i++ }; return i }:
// its loop header is passed n+1 times.
var countBody = body([][]byte{cat(u32(1), []byte{valI32})},
	[]byte{opBlock, blockTypeEmpty, opLoop, blockTypeEmpty},
	[]byte{0x20, 1, 0x20, 0, 0x4e, 0x0d, 1},       // local.get 1; local.get 0; i32.ge_s; br_if 1
	[]byte{0x20, 1, opI32Const, 1, 0x6a, 0x21, 1}, // i = i + 1
	[]byte{0x0c, 0, opEnd, opEnd},                 // br 0; end loop; end block
	[]byte{0x20, 1, opEnd},
)

// paramLoopBody counts to n with the count carried as the loop's parameter
// (block type index 2), so the guard runs with a value below it on the stack.
// Its loop header is passed max(n, 1) times.
var paramLoopBody = body([][]byte{cat(u32(1), []byte{valI32})},
	[]byte{opI32Const, 0, opLoop, 2},
	[]byte{opI32Const, 1, 0x6a, 0x22, 1},    // i32.add; local.tee 1
	[]byte{0x20, 1, 0x20, 0, 0x48, 0x0d, 0}, // local.get 1; local.get 0; i32.lt_s; br_if 0
	[]byte{opEnd, opEnd},
)

// decoyBody has no loop at all, but many immediates that contain the loop
// opcode byte 0x03: a rewriter that scanned bytes would find loops here.
var decoyBody = body([][]byte{cat(u32(3), []byte{valI32})},
	[]byte{opI32Const, 3, opDrop},
	[]byte{0x42, 0x83, 0x86, 0x8c, 0x18, opDrop}, // i64.const with 0x03-ish bytes
	[]byte{0x43, 3, 3, 3, 3, opDrop},             // f32.const
	[]byte{0x44, 3, 3, 3, 3, 3, 3, 3, 3, opDrop}, // f64.const
	[]byte{0x20, 3, 0x21, 3},                     // local.get 3; local.set 3
	[]byte{opBlock, blockTypeEmpty, opBlock, blockTypeEmpty, opBlock, blockTypeEmpty, opBlock, blockTypeEmpty},
	[]byte{0x20, 0, 0x0e, 3, 3, 3, 3, 3}, // br_table 3 3 3 default 3
	[]byte{opEnd, opEnd, opEnd, opEnd},
	[]byte{0x20, 0, 0xc0},                                 // i32.extend8_s (sign extension)
	[]byte{0x43, 0, 0, 0x40, 0x40, opPrefixFC, 0, opDrop}, // i32.trunc_sat_f32_s
	[]byte{opEnd},
)

// loopModule imports an unrelated function first, so sched_yield is not
// function 0, and exports count (2), paramLoop (3) and decoy (4).
func loopModule(extra ...[]byte) []byte {
	return module(
		yieldTypes,
		sec(secImport, vec(
			importFunc("env", "other", 0),
			importFunc("wasi_snapshot_preview1", "sched_yield", 0),
		)),
		sec(secFunction, vec(u32(1), u32(1), u32(1))),
		sec(secExport, vec(exportFunc("count", 2), exportFunc("paramLoop", 3), exportFunc("decoy", 4))),
		sec(secCode, vec(countBody, paramLoopBody, decoyBody)),
		cat(extra...),
	)
}
