// Package powercut owns the power-cut harness: a FUSE file system that shows
// a backing directory and keeps in memory every change to file contents that
// was not fsynced, so that a test can cut the power and see what a real disk
// would have kept.
//
// The model, precisely:
//
//   - Reads pass through to the backing file, with the unsynced changes of
//     the file laid over them.
//   - Writes, size changes (truncate, ftruncate, open with O_TRUNC) and
//     fallocate are kept in memory per file (its dirty 4 KiB pages and its
//     pending size) and served to reads from there.
//   - fsync and fdatasync of a file apply its kept changes to the backing
//     file. msync(MS_SYNC) of a shared mapping reaches the file system as
//     the dirty pages' writes followed by an fsync, so it is a sync too. A
//     store into a mapped page sends nothing by itself; the kernel writes
//     the dirty pages back when the mapping is unmapped (FUSE does so at
//     munmap, TestSharedMappingWrites logs it) or whenever its writeback
//     runs: plain writes, kept in memory, not synced.
//   - Metadata operations — create, mkdir, rename, unlink, rmdir, link,
//     symlink, chmod, chown, utimes, xattrs — reach the backing directory at
//     once, as if every directory were fsynced after each. So a cut can
//     leave a file whose creation was kept but whose size change was lost
//     (a 0-byte file that its writer had made 128 MiB and mapped), or a
//     file renamed into place whose contents were never synced.
//   - Cut drops every change that was not synced and makes the mount refuse
//     every further change (EIO); reads go on. The kernel's page cache may
//     still hold the dropped data, so after a cut the user kills the
//     processes that use the mount and calls Remount, which unmounts (the
//     kernel forgets the mount's cache) and mounts a fresh view of the same
//     backing directory: what it shows is what a disk would hold after the
//     power came back.
//
// A test uses it so:
//
//	pc := powercut.Mount(t, t.TempDir()) // unmounted when the test ends
//	// start a process whose files are under pc.Dir(); let it work
//	pc.Cut()      // the power goes: what was not synced is gone
//	// SIGKILL the process
//	pc.Remount(t) // the power is back: pc.Dir() shows the disk
//	// start the process again and check what it kept
//
// The backing directory itself is the "disk": applying a sync writes to it
// without fsyncing it (the machine running the test does not lose power),
// which keeps the harness fast.
//
// Mounting needs /dev/fuse, and root for the mount(2) made directly
// (without root, go-fuse falls back on fuse3's fusermount3); a missing
// /dev/fuse fails the test that asks for a mount, naming it. A test
// that maps files on the mount must do so in another process: a page fault
// served by the same Go process can deadlock its garbage collector.
package powercut

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// FS is a mounted power-cut file system over a backing directory.
type FS struct {
	backing string
	dir     string

	server *fuse.Server

	// gate orders changes against Cut: each change holds it shared and
	// checks cut; Cut holds it alone while it drops what was not synced.
	gate sync.RWMutex
	cut  bool

	mu    sync.Mutex
	files map[uint64]*file // by inode number: the files with kept changes, or that had some

	writes atomic.Int64 // write requests received
	syncs  atomic.Int64 // fsync requests of files received

	byDir map[string]int64 // fsync requests of files, by directory (relative); under mu
}

// Mount mounts a power-cut view of backingDir on a fresh directory and
// unmounts it when the test ends. It fails the test when /dev/fuse is
// missing or the mount is refused.
func Mount(t testing.TB, backingDir string) *FS {
	t.Helper()
	if err := checkDevice(fuseDevice); err != nil {
		t.Fatalf("powercut: %v", err)
	}
	backing, err := filepath.Abs(backingDir)
	if err != nil {
		t.Fatal(err)
	}
	f := &FS{backing: backing, dir: t.TempDir(), files: map[uint64]*file{}, byDir: map[string]int64{}}
	if err := f.mount(); err != nil {
		t.Fatalf("powercut: %v", err)
	}
	t.Cleanup(func() {
		if err := f.unmount(); err != nil {
			t.Errorf("powercut: %v", err)
		}
	})
	return f
}

// fuseDevice is the kernel's FUSE device, which every mount opens.
const fuseDevice = "/dev/fuse"

// checkDevice says, when the FUSE device is missing, what the power-cut
// tests need: a failure that names it, never a skip.
func checkDevice(path string) error {
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("the power-cut tests need FUSE, and %s is missing (%v): run them where it exists (a container needs --device %s)", path, err, path)
	}
	return nil
}

// Dir is where the file system is mounted; it stays the same across
// Remount.
func (f *FS) Dir() string { return f.dir }

// Backing is the backing directory: the "disk".
func (f *FS) Backing() string { return f.backing }

// Cut cuts the power: every change not synced is dropped, and every
// further change is refused with EIO until Remount.
func (f *FS) Cut() {
	f.gate.Lock()
	defer f.gate.Unlock()
	f.cut = true
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, fl := range f.files {
		fl.mu.Lock()
		fl.reset()
		fl.mu.Unlock()
	}
	clear(f.files)
}

// Dirty reports how many files have changes that are not synced.
func (f *FS) Dirty() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, fl := range f.files {
		fl.mu.Lock()
		if fl.dirty {
			n++
		}
		fl.mu.Unlock()
	}
	return n
}

// Writes is how many write requests the file system has received since it
// was first mounted: tests use it to see when the kernel sends a mapping's
// stores.
func (f *FS) Writes() int64 { return f.writes.Load() }

// Syncs is how many fsync (or fdatasync, or msync) requests of files the
// file system has received since it was first mounted: tests use it to
// see how many acknowledged writes share one.
func (f *FS) Syncs() int64 { return f.syncs.Load() }

// SyncsByDir is Syncs by the directory of the file synced, relative to
// Dir ("." for its top): which store syncs how often.
func (f *FS) SyncsByDir() map[string]int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.byDir)
}

// Remount unmounts the file system and mounts a fresh view of the backing
// directory on the same place, as a machine does when it starts again.
// Every process using the mount must have ended (after a Cut, kill them).
// Without a Cut before it, the changes not synced are written to the
// backing directory first, as an orderly shutdown's writeback would.
func (f *FS) Remount(t testing.TB) {
	t.Helper()
	if err := f.unmount(); err != nil {
		t.Fatalf("powercut: %v", err)
	}
	f.gate.Lock()
	if !f.cut {
		f.mu.Lock()
		for ino, fl := range f.files {
			fl.mu.Lock()
			err := fl.applyPath(f.backing)
			fl.mu.Unlock()
			if err != nil {
				f.mu.Unlock()
				f.gate.Unlock()
				t.Fatalf("powercut: writing back inode %d: %v", ino, err)
			}
		}
		f.mu.Unlock()
	}
	f.cut = false
	clear(f.files)
	f.gate.Unlock()
	if err := f.mount(); err != nil {
		t.Fatalf("powercut: %v", err)
	}
}

func (f *FS) mount() error {
	root := &fs.LoopbackRoot{Path: f.backing}
	var st syscall.Stat_t
	if err := syscall.Stat(f.backing, &st); err != nil {
		return fmt.Errorf("backing directory: %w", err)
	}
	root.Dev = uint64(st.Dev)
	root.NewNode = func(r *fs.LoopbackRoot, _ *fs.Inode, _ string, _ *syscall.Stat_t) fs.InodeEmbedder {
		return &node{LoopbackNode: fs.LoopbackNode{RootData: r}, fs: f}
	}
	rn := &node{LoopbackNode: fs.LoopbackNode{RootData: root}, fs: f}
	root.RootNode = rn
	sec := time.Second
	srv, err := fs.Mount(f.dir, rn, &fs.Options{
		EntryTimeout: &sec,
		AttrTimeout:  &sec,
		MountOptions: fuse.MountOptions{
			FsName:             f.backing,
			Name:               "powercut",
			DirectMount:        true,
			DisableReadDirPlus: true,
		},
	})
	if err != nil {
		return fmt.Errorf("mount %s on %s: %w", f.backing, f.dir, err)
	}
	f.server = srv
	return nil
}

// unmount unmounts, waiting up to 10 s for the kernel to see the last
// file of an ended process closed.
func (f *FS) unmount() error {
	if f.server == nil {
		return nil
	}
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; {
		if err = f.server.Unmount(); err == nil {
			f.server.Wait()
			f.server = nil
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("unmount %s: %v (is a process still using it?)", f.dir, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// change runs fn unless the power is cut, holding the gate shared.
func (f *FS) change(fn func() syscall.Errno) syscall.Errno {
	f.gate.RLock()
	defer f.gate.RUnlock()
	if f.cut {
		return syscall.EIO
	}
	return fn()
}

// file returns the kept state of inode ino, made when make is set.
func (f *FS) file(ino uint64, make bool) *file {
	f.mu.Lock()
	defer f.mu.Unlock()
	fl := f.files[ino]
	if fl == nil && make {
		fl = &file{ino: ino}
		f.files[ino] = fl
	}
	return fl
}

// forget drops the state of the file at path when its last name goes: its
// inode number may be given to another file.
func (f *FS) forget(path string) {
	var st syscall.Stat_t
	if syscall.Lstat(path, &st) != nil || st.Nlink > 1 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.files, st.Ino)
}

const pageSize = 4096

// file is one file's changes that were not synced.
type file struct {
	ino   uint64
	mu    sync.Mutex
	dirty bool
	size  int64            // the size readers see
	trunc int64            // backing bytes at and past trunc are gone (read as zeros)
	pages map[int64][]byte // dirty pages by index, pageSize bytes each
}

func (fl *file) reset() {
	fl.dirty, fl.size, fl.trunc, fl.pages = false, 0, 0, nil
}

// begin makes the file dirty, starting from the backing file's size.
func (fl *file) begin(backingSize func() (int64, error)) error {
	if fl.dirty {
		return nil
	}
	sz, err := backingSize()
	if err != nil {
		return err
	}
	fl.dirty, fl.size, fl.trunc, fl.pages = true, sz, sz, map[int64][]byte{}
	return nil
}

// page returns dirty page i, read from the backing file at fd first.
func (fl *file) page(fd int, i int64) ([]byte, error) {
	if p := fl.pages[i]; p != nil {
		return p, nil
	}
	p := make([]byte, pageSize)
	off := i * pageSize
	if off < fl.trunc {
		n, err := preadFull(fd, p[:min(pageSize, fl.trunc-off)], off)
		if err != nil {
			return nil, err
		}
		_ = n // past the backing file's end reads as zeros
	}
	fl.pages[i] = p
	return p, nil
}

// write lays data over the file at off.
func (fl *file) write(fd int, data []byte, off int64) error {
	for done := 0; done < len(data); {
		pos := off + int64(done)
		p, err := fl.page(fd, pos/pageSize)
		if err != nil {
			return err
		}
		done += copy(p[pos%pageSize:], data[done:])
	}
	fl.size = max(fl.size, off+int64(len(data)))
	return nil
}

// truncate sets the size: what lies past it reads as zeros if the file
// grows again.
func (fl *file) truncate(size int64) {
	if size < fl.size {
		fl.trunc = min(fl.trunc, size)
		for i, p := range fl.pages {
			switch start := i * pageSize; {
			case start >= size:
				delete(fl.pages, i)
			case start+pageSize > size:
				clear(p[size-start:])
			}
		}
	}
	fl.size = size
}

// read fills dest from off with what readers see, the backing file at fd
// under the dirty pages; it returns how many bytes it filled.
func (fl *file) read(fd int, dest []byte, off int64) (int, error) {
	if off >= fl.size {
		return 0, nil
	}
	dest = dest[:min(int64(len(dest)), fl.size-off)]
	n, err := preadFull(fd, dest, off)
	if err != nil {
		return 0, err
	}
	clear(dest[min(int64(n), max(0, fl.trunc-off)):])
	for i := off / pageSize; i*pageSize < off+int64(len(dest)); i++ {
		p := fl.pages[i]
		if p == nil {
			continue
		}
		start := i * pageSize
		if start >= off {
			copy(dest[start-off:], p)
		} else {
			copy(dest, p[off-start:])
		}
	}
	return len(dest), nil
}

// apply writes the file's changes to the backing file at fd.
func (fl *file) apply(fd int) error {
	if !fl.dirty {
		return nil
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return err
	}
	if fl.trunc < st.Size {
		if err := syscall.Ftruncate(fd, fl.trunc); err != nil {
			return err
		}
	}
	for i, p := range fl.pages {
		start := i * pageSize
		if start >= fl.size {
			continue
		}
		if _, err := syscall.Pwrite(fd, p[:min(pageSize, fl.size-start)], start); err != nil {
			return err
		}
	}
	if err := syscall.Ftruncate(fd, fl.size); err != nil {
		return err
	}
	fl.reset()
	return nil
}

// applyPath applies the file's changes through a new descriptor, found by
// its inode number under root (for Remount, when no handle is left).
func (fl *file) applyPath(root string) error {
	if !fl.dirty {
		return nil
	}
	var path string
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || path != "" {
			return nil
		}
		if info, err := d.Info(); err == nil {
			if st, ok := info.Sys().(*syscall.Stat_t); ok && st.Ino == fl.ino && d.Type().IsRegular() {
				path = p
				return filepath.SkipAll
			}
		}
		return nil
	})
	if path == "" {
		return nil // unlinked: nothing to write back
	}
	fd, err := syscall.Open(path, syscall.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	return fl.apply(fd)
}

func preadFull(fd int, buf []byte, off int64) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := syscall.Pread(fd, buf[n:], off+int64(n))
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return n, err
		}
		if m == 0 {
			break
		}
		n += m
	}
	return n, nil
}

// handle is an open file: a descriptor of the backing file, always opened
// for reading and writing so that syncs can apply through it.
type handle struct {
	lf *fs.LoopbackFile
	fd int
}

var (
	_ fs.FileReleaser = (*handle)(nil)
	_ fs.FileFlusher  = (*handle)(nil)
)

func (h *handle) Release(ctx context.Context) syscall.Errno { return h.lf.Release(ctx) }
func (h *handle) Flush(ctx context.Context) syscall.Errno   { return h.lf.Flush(ctx) }

// node is a file or directory of the mount: a loopback node whose content
// changes are kept until synced, and whose metadata changes are refused
// after a cut.
type node struct {
	fs.LoopbackNode
	fs *FS
}

var (
	_ fs.NodeLookuper   = (*node)(nil)
	_ fs.NodeOpener     = (*node)(nil)
	_ fs.NodeCreater    = (*node)(nil)
	_ fs.NodeReader     = (*node)(nil)
	_ fs.NodeWriter     = (*node)(nil)
	_ fs.NodeFsyncer    = (*node)(nil)
	_ fs.NodeAllocater  = (*node)(nil)
	_ fs.NodeGetattrer  = (*node)(nil)
	_ fs.NodeSetattrer  = (*node)(nil)
	_ fs.NodeMkdirer    = (*node)(nil)
	_ fs.NodeMknoder    = (*node)(nil)
	_ fs.NodeRmdirer    = (*node)(nil)
	_ fs.NodeUnlinker   = (*node)(nil)
	_ fs.NodeRenamer    = (*node)(nil)
	_ fs.NodeLinker     = (*node)(nil)
	_ fs.NodeSymlinker  = (*node)(nil)
	_ fs.NodeSetxattrer = (*node)(nil)
)

func (n *node) path() string {
	return filepath.Join(n.RootData.Path, n.Path(n.Root()))
}

func (n *node) ino() uint64 { return n.StableAttr().Ino }

// showSize puts the kept size of inode ino, if any, into out.
func (n *node) showSize(ino uint64, out *fuse.Attr) {
	if fl := n.fs.file(ino, false); fl != nil {
		fl.mu.Lock()
		if fl.dirty {
			out.Size = uint64(fl.size)
			out.Blocks = (out.Size + 511) / 512
		}
		fl.mu.Unlock()
	}
}

func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ch, errno := n.LoopbackNode.Lookup(ctx, name, out)
	if errno == 0 {
		n.showSize(out.Attr.Ino, &out.Attr)
	}
	return ch, errno
}

func (n *node) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if h, ok := f.(*handle); ok {
		var st syscall.Stat_t
		if err := syscall.Fstat(h.fd, &st); err != nil {
			return fs.ToErrno(err)
		}
		out.FromStat(&st)
	} else if errno := n.LoopbackNode.Getattr(ctx, nil, out); errno != 0 {
		return errno
	}
	n.showSize(n.ino(), &out.Attr)
	return 0
}

func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	errno := n.fs.change(func() syscall.Errno {
		if sz, ok := in.GetSize(); ok {
			fl := n.fs.file(n.ino(), true)
			fl.mu.Lock()
			err := fl.begin(func() (int64, error) { return n.backingSize(f) })
			if err == nil {
				fl.truncate(int64(sz))
			}
			fl.mu.Unlock()
			if err != nil {
				return fs.ToErrno(err)
			}
			in.Valid &^= fuse.FATTR_SIZE
		}
		if in.Valid&(fuse.FATTR_MODE|fuse.FATTR_UID|fuse.FATTR_GID|fuse.FATTR_ATIME|fuse.FATTR_MTIME|fuse.FATTR_ATIME_NOW|fuse.FATTR_MTIME_NOW) != 0 {
			return n.LoopbackNode.Setattr(ctx, nil, in, out)
		}
		return 0
	})
	if errno != 0 {
		return errno
	}
	return n.Getattr(ctx, f, out)
}

func (n *node) backingSize(f fs.FileHandle) (int64, error) {
	var st syscall.Stat_t
	var err error
	if h, ok := f.(*handle); ok {
		err = syscall.Fstat(h.fd, &st)
	} else {
		err = syscall.Lstat(n.path(), &st)
	}
	return st.Size, err
}

// readWrite turns open flags into the backing descriptor's: always read
// and write (so a sync can apply through any handle), never truncating or
// appending (the kernel gives every write its offset), never O_DIRECT (the
// harness reads and writes the backing file at any alignment).
func readWrite(flags uint32) uint32 {
	return flags&^(syscall.O_ACCMODE|syscall.O_TRUNC|syscall.O_APPEND|syscall.O_DIRECT) | syscall.O_RDWR
}

func (n *node) wrap(lf fs.FileHandle, truncate bool) (fs.FileHandle, syscall.Errno) {
	l, ok := lf.(*fs.LoopbackFile)
	fd, fdOK := -1, false
	if ok {
		fd, fdOK = l.PassthroughFd()
	}
	if !fdOK {
		return nil, syscall.EIO
	}
	h := &handle{lf: l, fd: fd}
	if truncate {
		var st syscall.Stat_t
		if err := syscall.Fstat(fd, &st); err != nil {
			return nil, fs.ToErrno(err)
		}
		fl := n.fs.file(st.Ino, true)
		fl.mu.Lock()
		err := fl.begin(func() (int64, error) { return st.Size, nil })
		fl.truncate(0)
		fl.mu.Unlock()
		if err != nil {
			return nil, fs.ToErrno(err)
		}
	}
	return h, 0
}

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	open := func() (fs.FileHandle, uint32, syscall.Errno) {
		lf, ff, errno := n.LoopbackNode.Open(ctx, readWrite(flags))
		if errno == syscall.EACCES || errno == syscall.EISDIR || errno == syscall.EROFS {
			lf, ff, errno = n.LoopbackNode.Open(ctx, flags&^(syscall.O_TRUNC|syscall.O_APPEND|syscall.O_DIRECT))
		}
		if errno != 0 {
			return nil, 0, errno
		}
		h, errno := n.wrap(lf, flags&syscall.O_TRUNC != 0)
		if errno != 0 {
			lf.(fs.FileReleaser).Release(ctx)
			return nil, 0, errno
		}
		return h, ff &^ fuse.FOPEN_DIRECT_IO, 0
	}
	if flags&syscall.O_TRUNC == 0 {
		return open()
	}
	var h fs.FileHandle
	var ff uint32
	errno := n.fs.change(func() (e syscall.Errno) { h, ff, e = open(); return e })
	return h, ff, errno
}

func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	var ch *fs.Inode
	var h fs.FileHandle
	errno := n.fs.change(func() syscall.Errno {
		c, lf, _, errno := n.LoopbackNode.Create(ctx, name, readWrite(flags), mode, out)
		if errno != 0 {
			return errno
		}
		if h, errno = n.wrap(lf, flags&syscall.O_TRUNC != 0); errno != 0 {
			lf.(fs.FileReleaser).Release(ctx)
			return errno
		}
		ch = c
		n.showSize(out.Attr.Ino, &out.Attr)
		return 0
	})
	return ch, h, 0, errno
}

func (n *node) Read(ctx context.Context, f fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h, ok := f.(*handle)
	if !ok {
		return nil, syscall.EBADF
	}
	if fl := n.fs.file(n.ino(), false); fl != nil {
		fl.mu.Lock()
		defer fl.mu.Unlock()
		if fl.dirty {
			k, err := fl.read(h.fd, dest, off)
			if err != nil {
				return nil, fs.ToErrno(err)
			}
			return fuse.ReadResultData(dest[:k]), 0
		}
	}
	k, err := preadFull(h.fd, dest, off)
	if err != nil {
		return nil, fs.ToErrno(err)
	}
	return fuse.ReadResultData(dest[:k]), 0
}

func (n *node) Write(ctx context.Context, f fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	h, ok := f.(*handle)
	if !ok {
		return 0, syscall.EBADF
	}
	n.fs.writes.Add(1)
	errno := n.fs.change(func() syscall.Errno {
		fl := n.fs.file(n.ino(), true)
		fl.mu.Lock()
		defer fl.mu.Unlock()
		if err := fl.begin(func() (int64, error) { return n.backingSize(f) }); err != nil {
			return fs.ToErrno(err)
		}
		return fs.ToErrno(fl.write(h.fd, data, off))
	})
	if errno != 0 {
		return 0, errno
	}
	return uint32(len(data)), 0
}

func (n *node) Fsync(ctx context.Context, f fs.FileHandle, flags uint32) syscall.Errno {
	h, ok := f.(*handle)
	if !ok {
		// A directory: its entries reached the backing directory already.
		return n.fs.change(func() syscall.Errno { return 0 })
	}
	n.fs.syncs.Add(1)
	dir := filepath.Dir(n.Path(n.Root()))
	n.fs.mu.Lock()
	n.fs.byDir[dir]++
	n.fs.mu.Unlock()
	return n.fs.change(func() syscall.Errno {
		fl := n.fs.file(n.ino(), false)
		if fl == nil {
			return 0
		}
		fl.mu.Lock()
		defer fl.mu.Unlock()
		return fs.ToErrno(fl.apply(h.fd))
	})
}

func (n *node) Allocate(ctx context.Context, f fs.FileHandle, off, size uint64, mode uint32) syscall.Errno {
	h, ok := f.(*handle)
	if !ok {
		return syscall.EBADF
	}
	return n.fs.change(func() syscall.Errno {
		fl := n.fs.file(n.ino(), true)
		fl.mu.Lock()
		defer fl.mu.Unlock()
		if err := fl.begin(func() (int64, error) { return n.backingSize(f) }); err != nil {
			return fs.ToErrno(err)
		}
		end := int64(off + size)
		switch mode {
		case 0:
			fl.size = max(fl.size, end)
		case unix.FALLOC_FL_KEEP_SIZE:
		case unix.FALLOC_FL_PUNCH_HOLE | unix.FALLOC_FL_KEEP_SIZE, unix.FALLOC_FL_ZERO_RANGE, unix.FALLOC_FL_ZERO_RANGE | unix.FALLOC_FL_KEEP_SIZE:
			sz := fl.size
			if lim := min(end, sz); int64(off) < lim {
				if err := fl.write(h.fd, make([]byte, lim-int64(off)), int64(off)); err != nil {
					return fs.ToErrno(err)
				}
			}
			if mode == unix.FALLOC_FL_ZERO_RANGE {
				fl.size = max(sz, end)
			} else {
				fl.size = sz
			}
		default:
			return syscall.EOPNOTSUPP
		}
		return 0
	})
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (ch *fs.Inode, errno syscall.Errno) {
	errno = n.fs.change(func() (e syscall.Errno) { ch, e = n.LoopbackNode.Mkdir(ctx, name, mode, out); return e })
	return ch, errno
}

func (n *node) Mknod(ctx context.Context, name string, mode, rdev uint32, out *fuse.EntryOut) (ch *fs.Inode, errno syscall.Errno) {
	errno = n.fs.change(func() (e syscall.Errno) { ch, e = n.LoopbackNode.Mknod(ctx, name, mode, rdev, out); return e })
	return ch, errno
}

func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (ch *fs.Inode, errno syscall.Errno) {
	errno = n.fs.change(func() (e syscall.Errno) { ch, e = n.LoopbackNode.Symlink(ctx, target, name, out); return e })
	return ch, errno
}

func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (ch *fs.Inode, errno syscall.Errno) {
	errno = n.fs.change(func() (e syscall.Errno) {
		ch, e = n.LoopbackNode.Link(ctx, target, name, out)
		if e == 0 {
			n.showSize(out.Attr.Ino, &out.Attr)
		}
		return e
	})
	return ch, errno
}

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	return n.fs.change(func() syscall.Errno { return n.LoopbackNode.Rmdir(ctx, name) })
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	return n.fs.change(func() syscall.Errno {
		n.fs.forget(filepath.Join(n.path(), name))
		return n.LoopbackNode.Unlink(ctx, name)
	})
}

func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	return n.fs.change(func() syscall.Errno {
		if p, ok := newParent.(*node); ok && flags&unix.RENAME_EXCHANGE == 0 {
			n.fs.forget(filepath.Join(p.path(), newName))
		}
		return n.LoopbackNode.Rename(ctx, name, newParent, newName, flags)
	})
}

func (n *node) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	return n.fs.change(func() syscall.Errno { return n.LoopbackNode.Setxattr(ctx, attr, data, flags) })
}

func (n *node) Removexattr(ctx context.Context, attr string) syscall.Errno {
	return n.fs.change(func() syscall.Errno { return n.LoopbackNode.Removexattr(ctx, attr) })
}
