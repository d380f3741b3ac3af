package powercut

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// pageSize is the unit in which a file's unsynced writes are kept.
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
