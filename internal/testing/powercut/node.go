package powercut

import (
	"context"
	"path/filepath"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

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
	*fs.LoopbackNode
	fs *FS
}

var (
	_ fs.NodeLookuper    = (*node)(nil)
	_ fs.NodeOpener      = (*node)(nil)
	_ fs.NodeCreater     = (*node)(nil)
	_ fs.NodeReader      = (*node)(nil)
	_ fs.NodeWriter      = (*node)(nil)
	_ fs.NodeFsyncer     = (*node)(nil)
	_ fs.NodeAllocater   = (*node)(nil)
	_ fs.NodeGetattrer   = (*node)(nil)
	_ fs.NodeSetattrer   = (*node)(nil)
	_ fs.NodeMkdirer     = (*node)(nil)
	_ fs.NodeMknoder     = (*node)(nil)
	_ fs.NodeRmdirer     = (*node)(nil)
	_ fs.NodeUnlinker    = (*node)(nil)
	_ fs.NodeRenamer     = (*node)(nil)
	_ fs.NodeLinker      = (*node)(nil)
	_ fs.NodeSymlinker   = (*node)(nil)
	_ fs.NodeSetxattrer  = (*node)(nil)
	_ fs.NodeWrapChilder = (*node)(nil)
)

// WrapChild makes every node the loopback creates under n one of ours.
func (n *node) WrapChild(_ context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	return &node{LoopbackNode: ops.(*fs.LoopbackNode), fs: n.fs}
}

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
