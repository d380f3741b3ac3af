package badgerdb

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// headerSize is the size of the header Badger writes at the start of every
// write-ahead log (.mem) and value log (.vlog) file before its first entry
// (Badger's vlogHeaderSize: a key id and an IV). A file shorter than it holds
// no entry.
const headerSize = 20

// recovery is what Open found in a store's directory from a stop that did
// not close it: the write-ahead logs Badger replays, and the files it set
// aside because they held nothing.
type recovery struct {
	replayed []string // non-empty .mem files: a memtable that was not flushed
	removed  []string // .mem/.vlog files shorter than their header
}

// prepare readies dir for Badger after a crash or a power cut. A cut can
// leave a write-ahead log or a value log whose creation reached the disk
// but whose size did not: an empty file, or one shorter than its header.
// Badger cannot open such a file (dgraph-io/badger#2207: Open fails with
// z.NewFile once for each, though it held nothing), so prepare removes
// them — they hold no entry, so nothing is lost — and reports the rest of
// what Badger will recover from.
func prepare(dir string) (recovery, error) {
	var r recovery
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return r, nil
	}
	if err != nil {
		return r, err
	}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !(strings.HasSuffix(name, ".mem") || strings.HasSuffix(name, ".vlog")) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return r, err
		}
		switch {
		case info.Size() < headerSize:
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				return r, fmt.Errorf("removing the empty file %s: %w", name, err)
			}
			r.removed = append(r.removed, fmt.Sprintf("%s (%d bytes)", name, info.Size()))
		case strings.HasSuffix(name, ".mem"):
			r.replayed = append(r.replayed, name)
		}
	}
	return r, nil
}

// unclean reports whether the store was not closed: a clean close flushes
// every memtable and removes its write-ahead log.
func (r recovery) unclean() bool { return len(r.replayed) > 0 || len(r.removed) > 0 }

// String is the one log line's message.
func (r recovery) String() string {
	s := "opened after a stop that did not close it (a crash or a power cut)"
	if len(r.replayed) > 0 {
		s += fmt.Sprintf("; replayed %d write-ahead log(s): %s", len(r.replayed), strings.Join(r.replayed, ", "))
	}
	if len(r.removed) > 0 {
		s += fmt.Sprintf("; removed %d file(s) created but never written, which held nothing: %s",
			len(r.removed), strings.Join(r.removed, ", "))
	}
	return s
}
