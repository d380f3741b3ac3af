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
//     munmap) or whenever its writeback
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
	rn := &node{LoopbackNode: &fs.LoopbackNode{RootData: root}, fs: f}
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
