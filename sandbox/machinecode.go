package sandbox

import (
	"bytes"
	"os"
	"strconv"
	"sync/atomic"
)

// wazero's compiler puts a module's machine code in memory it maps itself,
// outside the Go heap, and does not say how much. The process's anonymous
// executable mappings are that code (Go's own is mapped from its binary),
// so /proc/self/maps tells it: all of it at once (MachineCodeBytes), and a
// module's own as the address ranges its compile added. Where there is no
// /proc/self/maps, neither is known (0).

// span is an address range, [start, end).
type span struct{ start, end uint64 }

// execSpans returns the process's anonymous executable mappings, in
// address order as the kernel lists them; ok is false where
// /proc/self/maps cannot be read.
func execSpans() (spans []span, ok bool) {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return nil, false
	}
	for line := range bytes.Lines(b) {
		// address perms offset dev inode [path]
		f := bytes.Fields(line)
		if len(f) != 5 || len(f[1]) < 3 || f[1][2] != 'x' {
			continue // mapped from a file ([vdso] among them), or not executable
		}
		lo, hi, found := bytes.Cut(f[0], []byte{'-'})
		start, err1 := strconv.ParseUint(string(lo), 16, 64)
		end, err2 := strconv.ParseUint(string(hi), 16, 64)
		if found && err1 == nil && err2 == nil && end > start {
			spans = append(spans, span{start, end})
		}
	}
	return spans, true
}

// MachineCodeBytes returns the machine code the process holds: every
// module's compiled code, the host modules' and any other anonymous
// executable mapping (0 where /proc/self/maps cannot be read).
func MachineCodeBytes() uint64 {
	spans, _ := execSpans()
	var n uint64
	for _, s := range spans {
		n += s.end - s.start
	}
	return n
}

// added returns the bytes of after that no span of before covers: what was
// mapped between the two readings, however the kernel joined it to its
// neighbours, whatever was unmapped meanwhile. Both are in address order.
func added(before, after []span) uint64 {
	var n uint64
	i := 0
	for _, a := range after {
		for i < len(before) && before[i].end <= a.start {
			i++
		}
		at := a.start
		for j := i; j < len(before) && before[j].start < a.end; j++ {
			if before[j].start > at {
				n += before[j].start - at
			}
			at = max(at, before[j].end)
		}
		if a.end > at {
			n += a.end - at
		}
	}
	return n
}

// codeMeter measures what each compile maps: the executable mappings it
// added, when no other compile ran beside it (else the figure would be
// shared out by guess, and it is left unknown). There is one, machineCode,
// as the mappings are the process's, whatever sandbox compiles. (A runtime's
// host modules, compiled once at its first use, are not counted in: one
// made during a module's compile adds its few KiB to the module's figure.)
type codeMeter struct {
	inflight atomic.Int32  // compiles running
	started  atomic.Uint64 // compiles started, ever
}

// machineCode measures every compile of the process's sandboxes.
var machineCode codeMeter

// measure runs compile and returns the machine code it mapped, -1 when
// that is not known (another compile overlapped, code was unmapped
// meanwhile, or there is no /proc/self/maps).
func (cm *codeMeter) measure(compile func()) int64 {
	// Counted in before the mappings are read: a compile that overlaps
	// this one in any way sees, or is seen in, the counts.
	alone := cm.inflight.Add(1) == 1
	n := cm.started.Add(1)
	before, ok := execSpans()
	compile()
	after, _ := execSpans()
	alone = cm.started.Load() == n && alone
	cm.inflight.Add(-1)
	// A mapping unmapped meanwhile (a closed module's, by its finalizer)
	// may have left the very range the compile then mapped: unknown.
	if !ok || !alone || added(after, before) > 0 {
		return -1
	}
	return int64(added(before, after))
}
