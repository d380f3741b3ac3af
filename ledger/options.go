package ledger

import (
	"log/slog"

	"github.com/berthhq/berth/internal/diskspace"
)

// Options configure the Badger ledger. The zero value is a usable default.
type Options struct {
	// SyncWrites makes every Update fsync before it returns, so that a
	// committed transaction survives a power loss. Default false: a committed
	// transaction survives a crash of the process, but the last ones may be
	// lost if the machine itself goes down.
	SyncWrites bool

	// InMemory keeps the ledger in memory only; dir is ignored and nothing
	// survives Close. Default false. Meant for benchmarks and tests.
	InMemory bool

	// MemTableSize is the size of one Badger memtable in bytes. It bounds one
	// transaction: Badger accepts about 15 % of it (and a matching number of
	// entries) in one Update, beyond which writes fail with ErrTooBig.
	// Default (0): DefaultMemTableSize.
	MemTableSize int64

	// BlockCacheSize is Badger's block cache in bytes. Default (0):
	// DefaultBlockCacheSize.
	BlockCacheSize int64

	// Logger receives Badger's warnings and errors. Default (nil): Badger is
	// silent.
	Logger *slog.Logger

	// Space is asked before every Update and told what it wrote: while the
	// data directory's free space is below its reserve (or the directory is
	// gone), Update fails with its *diskspace.Error before running its
	// closure, and commits nothing. View is never refused. Default (nil): no
	// reserve.
	Space *diskspace.Guard
}

// Defaults applied for zero Options fields.
const (
	// DefaultMemTableSize is the MemTableSize used when Options leaves it 0:
	// 64 MiB, Badger's own default, so one transaction may hold about 9 MiB.
	DefaultMemTableSize = 64 << 20
	// DefaultBlockCacheSize is the BlockCacheSize used when Options leaves it
	// 0: 32 MiB.
	DefaultBlockCacheSize = 32 << 20
	// DefaultLimit is the page size of every listing of a Tx (ListParked,
	// Notifications, ListJobs, …) and the batch of every sweep when asked
	// for a limit of 0 or less.
	DefaultLimit = 100
)
