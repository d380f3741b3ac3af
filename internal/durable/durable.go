// Package durable owns the host's writes of whole files that must survive a
// power cut once the call that made them returns: a file is written to a
// temporary name beside its place, fsynced, renamed into place, and then its
// directory is fsynced, since a rename (like a create or a removal) is an
// entry of the directory and is on disk only once the directory is.
//
// A crash or a cut at any moment leaves the old file or the new one, never
// half of either, and never a name that a returned call made but the disk
// forgot.
package durable

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// WriteFile writes data to path with perm, durably: when it returns nil,
// the file's bytes and its name are on disk. A file already at path is
// replaced whole.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("fsync %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	return SyncDir(dir)
}

// Link makes path a second name of the file from, replacing a file already
// at path whole, durably: when it returns nil, the name is on disk. from's
// bytes must be on disk already (written by WriteFile): a link shares them,
// so a module kept twice is written and fsynced once. A file system without
// hard links fails, and the caller writes a copy.
func Link(from, path string) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, ".tmp-*") // a free name beside path
	if err != nil {
		return err
	}
	tmp.Close()
	os.Remove(tmp.Name())
	if err := os.Link(from, tmp.Name()); err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	return SyncDir(dir)
}

// Remove removes path, durably: when it returns nil the name is gone from
// the disk's copy of its directory. A path that does not exist is not an
// error.
func Remove(path string) error {
	if err := os.Remove(path); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// MkdirAll makes dir and any missing parents, durably: each directory it
// made is fsynced into its parent.
func MkdirAll(dir string, perm os.FileMode) error {
	dir = filepath.Clean(dir)
	if fi, err := os.Stat(dir); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("mkdir %s: not a directory", dir)
		}
		return nil
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := MkdirAll(parent, perm); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, perm); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	return SyncDir(parent)
}

// SyncDir fsyncs the directory dir, so that the entries made, renamed or
// removed in it are on disk.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}
