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
// module's own as what its compile added to it. Where there is no
// /proc/self/maps, neither is known (0).

// execBytes returns the size of the process's anonymous executable
// mappings; ok is false where /proc/self/maps cannot be read.
func execBytes() (n uint64, ok bool) {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0, false
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
			n += end - start
		}
	}
	return n, true
}

// MachineCodeBytes returns the machine code the process holds: every
// module's compiled code, the host modules' and any other anonymous
// executable mapping (0 where /proc/self/maps cannot be read).
func MachineCodeBytes() uint64 {
	n, _ := execBytes()
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
// that is not known (another compile overlapped, or no /proc/self/maps).
func (cm *codeMeter) measure(compile func()) int64 {
	// Counted in before the mappings are read: a compile that overlaps
	// this one in any way sees, or is seen in, the counts.
	alone := cm.inflight.Add(1) == 1
	n := cm.started.Add(1)
	before, ok := execBytes()
	compile()
	// The growth of the total, not the mappings that are new: the kernel
	// joins a new mapping to a neighbour with the same rights.
	after, _ := execBytes()
	alone = cm.started.Load() == n && alone
	cm.inflight.Add(-1)
	if !ok || !alone || after < before { // less: a closed module's code was unmapped meanwhile
		return -1
	}
	return int64(after - before)
}
