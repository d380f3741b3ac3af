package eventlog

import (
	"log/slog"

	"github.com/berthhq/berth/internal/diskspace"
)

// Options configure the Badger log. The zero value is a usable default.
type Options struct {
	// SyncWrites makes every Append fsync before it returns, so that a commit
	// survives a power loss. Default false: a returned commit survives a crash
	// of the process (Badger's write-ahead log is in the page cache) but the
	// last commits may be lost if the machine itself goes down.
	SyncWrites bool

	// InMemory keeps the log in memory only; dir is ignored and nothing
	// survives Close. Default false. Meant for benchmarks and throwaway hosts.
	InMemory bool

	// MemTableSize is the size of one Badger memtable in bytes; it also bounds
	// a single commit (Badger takes about 15 % of it for one transaction).
	// Default (0): 64 MiB, Badger's own default.
	MemTableSize int64

	// BlockCacheSize is Badger's block cache in bytes. Default (0): 64 MiB.
	BlockCacheSize int64

	// Logger receives Badger's warnings and errors. Default (nil): Badger is
	// silent.
	Logger *slog.Logger

	// Space is asked before every Append and told what it wrote: while the
	// data directory's free space is below its reserve (or the directory is
	// gone), Append fails with its *diskspace.Error and writes nothing.
	// Default (nil): no reserve.
	Space *diskspace.Guard
}

// Defaults applied for zero Options fields.
const (
	// DefaultMemTableSize is the MemTableSize used when Options leaves it 0.
	DefaultMemTableSize = 64 << 20
	// DefaultBlockCacheSize is the BlockCacheSize used when Options leaves it 0.
	DefaultBlockCacheSize = 64 << 20
)
