package badgerdb

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync/atomic"

	"github.com/dgraph-io/badger/v4"
)

// Settings are a store's resolved Badger settings (its package applies its
// own defaults first).
type Settings struct {
	Store          string // "eventlog", "ledger": tags log lines and errors
	Dir            string // ignored when InMemory
	SyncWrites     bool
	InMemory       bool
	MemTableSize   int64
	BlockCacheSize int64
	Logger         *slog.Logger // nil: Badger is silent
	// Managed opens Badger in managed mode (badger.OpenManaged) without
	// its conflict detection: the caller picks every commit's timestamp
	// and orders the commits itself (ledger/jetstream's cache).
	Managed bool
}

// DB is an open Badger database that knows its store's name and directory
// and remembers the last error Badger logged, so that a close that cannot
// finish says why.
type DB struct {
	*badger.DB
	store, dir string
	lastErr    *atomic.Pointer[string]
}

// Open opens (creating if needed) a Badger database with s. An error names
// the store's directory and, when Badger names one, the file it failed on
// and why, on one line.
//
// A directory left by a crash or a power cut opens on the first try: files
// the cut left empty are removed first (they held nothing), and one line
// at WARN on s.Logger says what the store recovered from.
func Open(s Settings) (*DB, error) {
	var rec recovery
	if !s.InMemory {
		var err error
		if rec, err = prepare(s.Dir); err != nil {
			return nil, fmt.Errorf("%s: open %s: %w", s.Store, s.Dir, err)
		}
	}
	last := new(atomic.Pointer[string])
	bo := badger.DefaultOptions(s.Dir).
		WithSyncWrites(s.SyncWrites).
		WithInMemory(s.InMemory).
		WithMemTableSize(s.MemTableSize).
		// Values up to this size live in the LSM tree, larger ones in the
		// value log; Badger wants it below its largest batch.
		WithValueThreshold(min(1<<20, s.MemTableSize/16)).
		WithBlockCacheSize(s.BlockCacheSize).
		WithLogger(Logger{Store: s.Store, last: last})
	if s.InMemory {
		bo = bo.WithDir("").WithValueDir("")
	}
	if s.Logger != nil {
		bo = bo.WithLogger(Logger{L: s.Logger, Store: s.Store, last: last})
	}
	open := badger.Open
	if s.Managed {
		bo = bo.WithDetectConflicts(false)
		open = badger.OpenManaged
	}
	db, err := open(bo)
	if err != nil {
		return nil, describeOpen(s.Store, s.Dir, err)
	}
	if rec.unclean() && s.Logger != nil {
		s.Logger.Warn(s.Store+": "+rec.String(), "store", s.Store, "dir", s.Dir)
	}
	return &DB{DB: db, store: s.Store, dir: s.Dir, lastErr: last}, nil
}

// describeOpen makes Badger's open error one line that leads with the file
// it failed on. Badger flattens the errors it wraps into text (with "err:"
// between the layers, and newlines from errors.Join), so the file is found
// in the text: the first path under dir that it names.
func describeOpen(store, dir string, err error) error {
	msg := strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", "; ")), " ")
	if dir != "" {
		file := regexp.MustCompile(regexp.QuoteMeta(strings.TrimSuffix(dir, "/")) + `/[^\s"':;]+`).FindString(msg)
		if file != "" {
			cause := msg
			if i := strings.LastIndex(msg, " err: "); i >= 0 {
				cause = msg[i+len(" err: "):]
			}
			return fmt.Errorf("%s: open %s: file %s: %s (Badger: %s)", store, dir, file, cause, msg)
		}
	}
	return fmt.Errorf("%s: open %s: %s", store, dir, msg)
}

// Close flushes and closes the database, waiting until ctx is done at most.
// Badger's close cannot be cut short without risking what it is writing,
// so it is not: when ctx ends first, Close returns an error naming the
// store, its directory and the last error Badger logged (a memtable flush
// that keeps failing, say, on a directory removed under the host), and the
// close goes on in the background until the process exits. What was
// acknowledged is in the write-ahead log, replayed at the next open, as
// after a crash.
func (d *DB) Close(ctx context.Context) error {
	done := make(chan error, 1)
	go func() { done <- d.DB.Close() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("%s: close %s: %w", d.store, d.dir, err)
		}
		return nil
	case <-ctx.Done():
		why := "Badger logged no error"
		if p := d.lastErr.Load(); p != nil {
			why = "Badger's last error: " + *p
		}
		return fmt.Errorf("%s: %s was not flushed and closed in time (%w); %s", d.store, d.dir, context.Cause(ctx), why)
	}
}

// LastError returns the last error line Badger logged, "" if none.
func (d *DB) LastError() string {
	if p := d.lastErr.Load(); p != nil {
		return *p
	}
	return ""
}
