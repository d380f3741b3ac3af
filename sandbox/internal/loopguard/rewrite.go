package loopguard

import "fmt"

// Version names the rewrite Rewrite does. Bump it whenever Rewrite's output
// for some input changes: stored rewrites (the sandbox keeps them beside its
// compilation cache) are used only by the version that made them.
const Version = 2

// DefaultInterval is the Interval used when Options.Interval is zero.
//
// A loop-header pass in Go-compiled code costs on the order of a nanosecond,
// so 10,000 passes are roughly 10–50µs of guest work: the host is called often
// enough that a spinning guest overruns its deadline by well under a
// millisecond, and rarely enough that the call into Go (tens of nanoseconds,
// plus a deadline check) is amortised to a fraction of a percent. The guard's
// cost is then dominated by the decrement and test at each loop header.
const DefaultInterval = 10_000

// Options configures Rewrite. Zero values mean defaults.
type Options struct {
	// Interval is how many loop-header passes run between two calls to
	// sched_yield. Zero means DefaultInterval (10,000; see there for why);
	// negative values are an error.
	Interval int32
}

// Result describes a rewrite.
type Result struct {
	// Module is the rewritten module.
	Module []byte
	// Loops is the number of loop headers instrumented.
	Loops int
	// Functions is the number of function bodies walked.
	Functions int
	// YieldIndex is the function index of the sched_yield import that the
	// guard calls.
	YieldIndex uint32
	// CounterGlobal is the index of the added counter global.
	CounterGlobal uint32
}

// Rewrite returns a copy of module in which every loop header decrements a
// counter global and, every opts.Interval passes, resets it and calls the
// module's wasi_snapshot_preview1.sched_yield import. All sections are kept
// byte for byte except the global section (one global added), the code
// section (bodies rewritten), the data section (neighbouring segments
// joined, where that leaves memory as it was: mergeData) and custom
// sections that refer to code offsets (dropped: DWARF, source maps,
// relocations).
//
// Rewrite does not validate the module beyond what decoding requires; the
// runtime that compiles the result does.
func Rewrite(module []byte, opts Options) (*Result, error) {
	interval := opts.Interval
	if interval == 0 {
		interval = DefaultInterval
	}
	if interval < 0 {
		return nil, fmt.Errorf("loopguard: negative Interval %d", interval)
	}

	secs, err := splitSections(module)
	if err != nil {
		return nil, err
	}
	var (
		types              []funcType
		imports            importInfo
		declared           uint32
		globalSec, codeSec *section
		dataSec            *section
		dataCount          bool
	)
	for i := range secs {
		s := &secs[i]
		switch s.id {
		case secType:
			if types, err = parseTypes(*s); err != nil {
				return nil, err
			}
		case secImport:
			if imports, err = parseImports(*s, types); err != nil {
				return nil, err
			}
		case secFunction:
			if declared, err = countOnly(*s); err != nil {
				return nil, err
			}
		case secGlobal:
			globalSec = s
		case secCode:
			codeSec = s
		case secData:
			dataSec = s
		case secDataCount:
			dataCount = true
		}
	}
	if !imports.found {
		return nil, ErrNoYieldImport
	}
	numTypes := uint32(len(types))

	globals, definedGlobals, err := appendGlobal(globalSec, interval, numTypes)
	if err != nil {
		return nil, err
	}
	res := &Result{YieldIndex: imports.yield, CounterGlobal: imports.globals + definedGlobals}
	if res.CounterGlobal < imports.globals {
		return nil, malformedAt(-1, "too many globals")
	}

	var code []byte
	if codeSec != nil {
		g := guard(interval, res.CounterGlobal, res.YieldIndex)
		if code, err = rewriteCode(*codeSec, declared, imports.funcs, numTypes, g, res); err != nil {
			return nil, err
		}
	} else if declared != 0 {
		return nil, malformedAt(-1, "%d functions declared but no code section", declared)
	}

	var data []byte // the merged data section; nil: as it was
	if dataSec != nil && !dataCount {
		data = mergeData(dataSec.payload, dataSec.offset)
	}

	out := make([]byte, 0, len(module)+len(code)-lenPayload(codeSec)+64)
	out = append(out, wasmHeader[:]...)
	globalRank, _ := sectionRank(secGlobal)
	insert := globalSec == nil // the module has no global section: add one
	for i := range secs {
		s := &secs[i]
		if insert && s.id != secCustom {
			// Insert the new global section before the first section that
			// must follow it; custom sections may sit anywhere.
			if rank, _ := sectionRank(s.id); rank > globalRank {
				out = appendSection(out, secGlobal, globals)
				insert = false
			}
		}
		switch {
		case s == globalSec:
			out = appendSection(out, secGlobal, globals)
		case s == codeSec:
			out = appendSection(out, secCode, code)
		case s == dataSec && data != nil:
			out = appendSection(out, secData, data)
		case s.id == secCustom && offsetDependent(s.name):
			// Dropped: it would describe the old code offsets.
		default:
			out = append(out, s.raw...)
		}
	}
	if insert {
		out = appendSection(out, secGlobal, globals)
	}
	res.Module = out
	return res, nil
}

func lenPayload(s *section) int {
	if s == nil {
		return 0
	}
	return len(s.payload)
}

// guard returns the instructions inserted at the start of every loop body:
//
//	global.get $c; i32.const 1; i32.sub; global.set $c
//	global.get $c; i32.eqz
//	if
//	  i32.const interval; global.set $c
//	  call $sched_yield; drop
//	end
//
// It pushes and pops only its own values, so it keeps the stack balanced
// whatever the loop's block type.
func guard(interval int32, counter, yield uint32) []byte {
	g := []byte{opGlobalGet}
	g = appendU32(g, counter)
	g = append(g, opI32Const, 1, opI32Sub, opGlobalSet)
	g = appendU32(g, counter)
	g = append(g, opGlobalGet)
	g = appendU32(g, counter)
	g = append(g, opI32Eqz, opIf, blockTypeEmpty, opI32Const)
	g = appendS32(g, interval)
	g = append(g, opGlobalSet)
	g = appendU32(g, counter)
	g = append(g, opCall)
	g = appendU32(g, yield)
	return append(g, opDrop, opEnd)
}

// rewriteCode returns the payload of the code section with g inserted at the
// start of every loop body, and counts loops and functions into res.
func rewriteCode(s section, declared, importedFuncs, numTypes uint32, g []byte, res *Result) ([]byte, error) {
	r := &reader{buf: s.payload, base: s.offset}
	n, err := r.u32()
	if err != nil {
		return nil, err
	}
	if n != declared {
		return nil, malformedAt(s.offset, "code section has %d bodies for %d declared functions", n, declared)
	}
	// Go bodies average a few loops per kilobyte; leave room for some.
	out := appendU32(make([]byte, 0, len(s.payload)+len(s.payload)/16), n)
	var loops []int
	for i := range n {
		fn := int(importedFuncs) + int(i)
		size, err := r.u32()
		if err != nil {
			return nil, inFunc(fn, err)
		}
		bodyOff := r.offset()
		body, err := r.bytes(uint64(size))
		if err != nil {
			return nil, inFunc(fn, err)
		}
		br := &reader{buf: body, base: bodyOff}
		if err := br.locals(); err != nil {
			return nil, inFunc(fn, err)
		}
		if loops, err = walkExpr(br, numTypes, fn, loops[:0]); err != nil {
			return nil, err
		}
		if !br.eof() {
			return nil, inFunc(fn, br.errorf("%d bytes after the end of the body", len(body)-br.pos))
		}
		newSize := uint64(len(body)) + uint64(len(loops))*uint64(len(g))
		if newSize > 1<<32-1 {
			return nil, inFunc(fn, malformedAt(bodyOff, "rewritten body too large"))
		}
		out = appendU32(out, uint32(newSize))
		last := 0
		for _, p := range loops {
			out = append(out, body[last:p]...)
			out = append(out, g...)
			last = p
		}
		out = append(out, body[last:]...)
		res.Loops += len(loops)
		res.Functions++
	}
	if !r.eof() {
		return nil, r.errorf("trailing bytes in code section")
	}
	return out, nil
}

// locals skips the local declarations at the start of a function body.
func (r *reader) locals() error {
	n, err := r.u32()
	if err != nil {
		return err
	}
	for range n {
		if _, err := r.u32(); err != nil {
			return err
		}
		if _, err := r.valType(); err != nil {
			return err
		}
	}
	return nil
}
