package jetstream

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/berthhq/berth/internal/diskspace"
	"github.com/berthhq/berth/internal/jsapi"
)

// Options configure a Store. The zero value is a usable default; every host
// of one deployment must give the same Stream, Subject and Replicas.
type Options struct {
	// Stream is the name of the JetStream stream that holds the ledger's
	// transactions; Open creates it if it is missing. Default (""):
	// DefaultStream.
	Stream string

	// Subject is the one subject the stream takes, and transactions are
	// published on. Default (""): DefaultSubject.
	Subject string

	// Replicas is the stream's replica count: 1, or 3 on a three-node
	// cluster, where a node may fail without the ledger noticing more than
	// latency. Default (0): 1.
	Replicas int

	// Dir is the directory of the local cache: the ledger materialized
	// from the stream, in a Badger database under Dir/<Stream>. A reopen
	// replays only the stream's tail; an empty, missing or corrupt cache is
	// rebuilt from the stream (from its latest snapshot and the tail after
	// it, once compacted). Default (""): the cache is kept in memory, and
	// every Open rebuilds it.
	Dir string

	// Timeout bounds how long one commit waits for the stream to take its
	// transaction (publishing again while the stream elects a leader) and
	// for this host to apply it, and how long a View waits to catch up.
	// Default (0): DefaultTimeout.
	Timeout time.Duration

	// OpenTimeout bounds how long Open asks for the stream while the NATS
	// cluster cannot answer yet (forming, electing its leader, other hosts
	// creating it at the same moment: internal/jsapi). It does not bound
	// catching the cache up with the stream, which takes as long as the
	// stream's tail (Open's context does). Default (0): 30 s.
	OpenTimeout time.Duration

	// MaxAttempts bounds how often Update runs its closure when
	// transactions of other hosts that committed first keep conflicting
	// with it; then Update fails with ErrConflict. Default (0):
	// DefaultMaxAttempts.
	MaxAttempts int

	// CompactEvery is how many stream messages past the last compaction
	// point make a host compact the stream (compact.go): publish a new
	// point, snapshot its cache there to the object store
	// <Stream>_SNAPSHOTS, and purge the stream before it, so that the stream
	// does not grow forever and a new host starts from the snapshot.
	// Negative: never compact. Default (0): DefaultCompactEvery.
	CompactEvery int

	// CompactKeep is how many messages before a compaction point the purge
	// leaves in the stream, for hosts running a little behind: a host
	// further behind than that when the purge comes restores its cache from
	// the snapshot instead of applying the messages it missed (its Updates
	// waiting meanwhile fail, their outcome unknown to it). Default (0):
	// DefaultCompactKeep.
	CompactKeep int

	// Space is asked before every Update and told what it wrote, as the
	// Badger store's (ledger.Options.Space): while the cache directory's
	// free space is below its reserve, Update fails with its
	// *diskspace.Error before running its closure. Default (nil): no
	// reserve.
	Space *diskspace.Guard

	// Logger receives the cache's warnings (a cache rebuilt, a message that
	// could not be read). Default (nil): nothing is logged.
	Logger *slog.Logger
}

// Defaults applied for zero Options fields.
const (
	// DefaultStream is the stream's name when Options leaves it empty.
	DefaultStream = "BERTH_LEDGER"
	// DefaultSubject is the stream's subject when Options leaves it empty.
	DefaultSubject = "berth.ledger.tx"
	// DefaultTimeout is Options.Timeout when left 0.
	DefaultTimeout = 30 * time.Second
	// DefaultMaxAttempts is Options.MaxAttempts when left 0.
	DefaultMaxAttempts = 50
	// DefaultCompactEvery is Options.CompactEvery when left 0.
	DefaultCompactEvery = 100_000
	// DefaultCompactKeep is Options.CompactKeep when left 0.
	DefaultCompactKeep = 10_000
)

// resolved returns o with its defaults applied, or an error naming a bad
// field.
func (o Options) resolved() (Options, error) {
	if o.Stream == "" {
		o.Stream = DefaultStream
	}
	if o.Subject == "" {
		o.Subject = DefaultSubject
	}
	switch o.Replicas {
	case 0:
		o.Replicas = 1
	case 1, 3:
	default:
		return o, fmt.Errorf("ledger/jetstream: replicas %d: want 1 or 3", o.Replicas)
	}
	if o.OpenTimeout == 0 {
		o.OpenTimeout = jsapi.DefaultWait
	}
	if o.Timeout < 0 || o.MaxAttempts < 0 {
		return o, fmt.Errorf("ledger/jetstream: negative timeout %v or max attempts %d", o.Timeout, o.MaxAttempts)
	}
	if o.CompactKeep < 0 {
		return o, fmt.Errorf("ledger/jetstream: negative compact keep %d", o.CompactKeep)
	}
	if o.CompactEvery == 0 {
		o.CompactEvery = DefaultCompactEvery
	}
	if o.CompactKeep == 0 {
		o.CompactKeep = DefaultCompactKeep
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}
