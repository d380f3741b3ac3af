package config

import (
	"fmt"
	"time"

	"github.com/berthhq/berth/internal/diskspace"
	"github.com/berthhq/berth/registry"
	"github.com/berthhq/berth/retry"
)

// DefaultMinFree is the default of store.min-free: 512MiB. Both stores (the event log and the ledger)
// are Badger databases with 64MiB memtables, and each writes its memtable through a memory-mapped,
// sparse file twice that size; a write into a page of it the filesystem cannot back kills the host
// with SIGBUS. To finish what it has accepted, each store may still need the rest of its memtable file
// and a table of about a memtable to flush it to: 2 × (128MiB + 64MiB) is 384MiB for the two. The rest
// is headroom for the value log (values above 1MiB), compactions writing their new tables before
// removing the old, uploaded modules and the compilation cache.
const DefaultMinFree = 512 * MiB

// StoreConfig is [store]: how the host's stores (event log, ledger, modules) use the disk.
type StoreConfig struct {
	// MinFree is the free space the data directory's filesystem must keep (default 512MiB): below it,
	// writes (appends, ledger writes, module uploads) are refused with 507 Insufficient Storage while
	// reads go on, writes resume when space returns, and the host refuses to start. "0B" turns it off.
	MinFree Size `toml:"min-free"`
	// ModuleVersions is how many versions of each module are kept for rollback, the current one included
	// (default 10; 1 keeps only the current one). Older ones are removed at the next upload.
	ModuleVersions int `toml:"module-versions"`
	// ResolvedRetention is how long a resumed or skipped aggregate's record (its error, attempts and
	// history: who resolved it and why) stays queryable at GET /v1/resolved (default 7 days).
	ResolvedRetention retry.Duration `toml:"resolved-retention"`
	// AuditRetention is how long the audit log keeps an entry (default 90 days).
	AuditRetention retry.Duration `toml:"audit-retention"`
	// Backend is where the event log is kept: "badger" (the default, in the data directory) or
	// "jetstream" (a NATS JetStream stream, [store.jetstream], shared by every host pointed at it, with
	// the ledger, the modules and the cluster's membership beside it: cluster mode, [cluster]). Changing
	// it needs a restart.
	Backend string `toml:"backend"`
	// JetStream is [store.jetstream], used when Backend is "jetstream".
	JetStream JetStreamConfig `toml:"jetstream"`
	// Sync is when the Badger stores fsync (default "always"): "always" makes every write that a
	// client is told succeeded — and every ledger write of the host's own — durable before the call
	// returns, so that a power cut loses nothing acknowledged; "none" leaves the writes in the page
	// cache until a memtable fills or the host stops (faster appends; a power cut or a kernel crash
	// loses what was written since, acknowledged or not; a crash of the host alone loses nothing).
	// Changing it needs a restart. With store.backend "jetstream" the NATS servers' sync_interval
	// decides instead.
	Sync string `toml:"sync"`
}

// Values of store.sync.
const (
	// SyncAlways fsyncs every write before it is acknowledged (the default).
	SyncAlways = "always"
	// SyncNone leaves writes to the page cache: fast, but a power cut loses acknowledged writes.
	SyncNone = "none"
)

// SyncWrites reports whether the Badger stores fsync every write (store.sync = "always").
func (s StoreConfig) SyncWrites() bool { return s.Sync != SyncNone }

// Defaults of store.resolved-retention and store.audit-retention.
const (
	DefaultResolvedRetention = retry.Duration(7 * 24 * time.Hour)
	DefaultAuditRetention    = retry.Duration(90 * 24 * time.Hour)
)

// DefaultModuleVersions is the default of store.module-versions: the registry's.
const DefaultModuleVersions = registry.DefaultKeepVersions

// ModuleVersions returns store.module-versions: how many versions of a module are kept.
func (c *Config) ModuleVersions() int { return c.Store.ModuleVersions }

func (s StoreConfig) validate(p *problems, at keyPath) {
	if s.MinFree < 0 {
		p.add(at.key("min-free"), fmt.Sprintf("%q", s.MinFree.String()), "must not be negative")
	}
	positiveDuration(p, at.key("resolved-retention"), s.ResolvedRetention)
	positiveDuration(p, at.key("audit-retention"), s.AuditRetention)
	if s.ModuleVersions < 1 || s.ModuleVersions > 1000 {
		p.add(at.key("module-versions"), fmt.Sprint(s.ModuleVersions), "must be from 1 (only the current version) to 1000")
	}
	if s.Sync != SyncAlways && s.Sync != SyncNone {
		p.add(at.key("sync"), fmt.Sprintf("%q", s.Sync), "must be %q or %q", SyncAlways, SyncNone)
	}
	s.validateBackend(p, at)
}

// DiskOptions returns the settings of the guard of the data directory's free space
// (internal/diskspace): the reserve store.min-free, named so in its messages. The host adds the Logger
// (and a test, if it wants, the Statfs that tells the free space).
func (c *Config) DiskOptions() diskspace.Options {
	return diskspace.Options{Reserve: c.Store.MinFree.Bytes(), ReserveName: "store.min-free"}
}
