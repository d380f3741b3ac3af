package sandbox

import (
	"os"
	"syscall"
)

// readMapped returns the contents of the file at path mapped read-only into
// memory, not copied: a new host's reads of its rewrites from the cache
// would otherwise fault in a fresh page of heap for each 4 KiB of a 4 MiB
// module, ~30 ms of CPU on this project's VMs against ~4 for the mapping
// (issue 32, the deploy path from the cache). The mapping is never
// unmapped: what was compiled from it may still be read by a compile of
// the same bytes, and a module's code is kept for its life anyway. The
// file must not be truncated while mapped (a read past its end would be a
// SIGBUS): the stores that map files replace them by rename, which leaves
// the mapped file whole. An empty file, or one that cannot be mapped, is
// read instead. drop unmaps what the caller turned down, referenced by
// nothing (a no-op for what was read).
func readMapped(path string) (b []byte, drop func(), err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if n := st.Size(); n > 0 && n == int64(int(n)) {
		if b, err := syscall.Mmap(int(f.Fd()), 0, int(n), syscall.PROT_READ, syscall.MAP_PRIVATE|syscall.MAP_POPULATE); err == nil {
			return b, func() { syscall.Munmap(b) }, nil
		}
	}
	b, err = os.ReadFile(path)
	return b, func() {}, err
}
