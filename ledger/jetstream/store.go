// Package jetstream is the ledger (ledger.Store) on NATS JetStream, shared
// by every host pointed at the same stream.
//
// The stream is a replicated log of transactions: one message per
// committed Update, carrying the stream sequence its reads saw (its
// snapshot), what it read (keys, and key ranges it iterated) and what it
// wrote. Every host applies the stream in order to a local Badger cache in
// managed mode, a transaction at sequence N committing at timestamp N, so
// the ledger as of any sequence is a Badger read at it. A transaction at N
// commits unless something it read has a version after its snapshot and
// before N — deterministic optimistic concurrency: every host decides each
// message alike, from the stream alone. One message is one transaction, so
// a transaction lands whole or not at all. What the last transactions wrote
// is also kept in memory (recent.go), which answers that check and a
// closure's point reads of those keys as the cache's Badger would.
//
// Fencing follows: Tx.Fence reads the partition's owner key, so a claim
// that commits after a fenced transaction's snapshot aborts it, and its
// re-run sees the new owner and fails with ledger.ErrFenced.
//
// The stream is compacted as it grows (Options.CompactEvery): a host
// publishes a compaction point M, writes its cache as of M to the object
// store <Stream>_SNAPSHOTS and purges the stream before M (keeping
// Options.CompactKeep messages for hosts running behind). From M on, a
// transaction whose snapshot is before M aborts on every host and runs
// again, so a host with an empty cache (or one that fell behind the purge)
// restores the snapshot and replays the tail, deciding every later message
// as the hosts that applied the whole stream.
//
// What the stream and the cache hold is versioned by Layout, recorded in
// the stream's metadata and in the cache: Open refuses a stream or a cache
// of a newer (or unknown) layout with ErrLayout naming it, and rebuilds a
// cache of an older one from the stream; a running host that meets a
// message of a format it does not read stops its cache rather than decide
// that message otherwise than the others.
//
// Each host follows the stream with an ephemeral consumer of its own (not
// nats.go's ordered consumer, whose ten-second wait to re-create a consumer
// stalled Updates about as long when a node of an R3 cluster went down):
// it is re-created at once from the sequence after the last applied when
// it fails or misses two heartbeats, and an Update whose transaction it has
// not delivered within fillDelay reads what the cache lacks from the stream
// by sequence. Losing the node that leads the stream (and JetStream) costs
// an Update about two seconds at most (publishTimeout, for a publish sent
// to the lost node). Nothing is lost meanwhile.
package jetstream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berthhq/berth/internal/badgerdb"
	"github.com/berthhq/berth/internal/jsapi"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/ledger/internal/kvtx"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// ErrConflict means an Update's closure ran Options.MaxAttempts times and
// each time a transaction of another host committed first something it had
// read. Nothing of it is committed.
var ErrConflict = errors.New("ledger/jetstream: transaction kept conflicting with other hosts' commits")

// Store is the ledger on a JetStream stream. It is safe for concurrent use.
// Updates of one Store run one at a time (as the Badger store's do); Views
// run concurrently.
type Store struct {
	opts       Options
	nc         *nats.Conn
	js         jetstream.JetStream
	stream     jetstream.Stream
	db         *badgerdb.DB
	maxPayload int64
	identity   string // the stream's: its name and creation time

	stopFollow context.CancelFunc // ends follow and compactor
	background sync.WaitGroup     // follow and compactor
	compactDue chan struct{}      // asks the compactor to run

	// life is held shared by every transaction and exclusively by Close.
	life   sync.RWMutex
	closed bool

	// updating serialises Updates: a token, taken with the caller's
	// context, so an Update behind a slow one (NATS out of reach) gives
	// up by its own deadline rather than the slow one's.
	updating chan struct{}

	// applyMu is held while a message is applied; stopped (by Close) ends
	// applying.
	applyMu sync.Mutex
	stopped bool
	floor   uint64 // the last compaction point applied (compact.go)
	// recent is what the last transactions applied wrote (recent.go).
	recent *recentWrites

	// mu guards the applier's progress.
	mu       sync.Mutex
	applied  uint64               // the last stream sequence applied
	advanced chan struct{}        // closed and replaced at each advance
	broken   error                // what stopped the cache, if anything
	waiters  map[string]chan bool // Updates waiting for their outcome, by message id
	// foreignAbort is the sequence of another host's transaction that
	// aborted, until an Update of this host yielded to its retry (yield).
	foreignAbort uint64

	// delivering says the current consumer has delivered since it was
	// made: until then an Update reads its transaction from the stream at
	// once (reach).
	delivering atomic.Bool
}

var _ ledger.Store = (*Store)(nil)

// Open opens the ledger on the stream opts name, creating the stream if it
// is missing, brings the local cache up to the stream's last sequence, and
// keeps applying the stream until Close. nc stays the caller's: Close does
// not close it.
func Open(ctx context.Context, nc *nats.Conn, opts Options) (*Store, error) {
	o, err := opts.resolved()
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("ledger/jetstream: %w", err)
	}
	// Asking for the stream is bounded by OpenTimeout; catching up with it
	// (restoring a snapshot, applying the tail) only by ctx.
	actx, cancel := context.WithTimeout(ctx, o.OpenTimeout)
	defer cancel()
	stream, err := createStream(actx, js, o)
	if err != nil {
		return nil, err
	}
	info, err := request(actx, func(ctx context.Context) (*jetstream.StreamInfo, error) { return stream.Info(ctx) })
	if err != nil {
		return nil, fmt.Errorf("ledger/jetstream: stream %s: %w", o.Stream, err)
	}
	identity := fmt.Sprintf("%s@%d", o.Stream, info.Created.UnixNano())
	db, st, err := loadCache(cacheDir(o.Dir, o.Stream), identity, info.State.LastSeq, o)
	if err != nil {
		return nil, err
	}
	if last, first := info.State.LastSeq, info.State.FirstSeq; last > st.applied && first > st.applied+1 {
		// Compacted past the cache: start from the snapshot.
		db, st, err = restoreCache(ctx, js, o, db, identity, first, st.applied, last)
		if err != nil {
			return nil, err
		}
	}
	s := &Store{
		updating: make(chan struct{}, 1),
		opts:     o, nc: nc, js: js, stream: stream, db: db, maxPayload: nc.MaxPayload(), identity: identity,
		applied: st.applied, floor: st.floor, advanced: make(chan struct{}), waiters: map[string]chan bool{},
		compactDue: make(chan struct{}, 1), recent: newRecentWrites(st.applied),
	}
	s.start()
	if err := s.waitApplied(ctx, info.State.LastSeq); err != nil {
		_ = s.Close(context.Background())
		return nil, err
	}
	if err := ledger.BuildIndex(ctx, s); err != nil {
		_ = s.Close(context.Background())
		return nil, err
	}
	return s, nil
}

// request makes a request to JetStream's API, each try bounded by
// jsapi.RequestTimeout, asking again while the cluster cannot answer it yet (a
// stream just created or electing a leader, too few peers for the
// replicas, no server answering while a node goes down under the client),
// until ctx ends (jsapi.Retry).
func request[T any](ctx context.Context, fn func(context.Context) (T, error)) (T, error) {
	return jsapi.Retry(ctx, jsapi.Opening(jsapi.RequestTimeout), jsapi.Transient, fn)
}

// start follows the stream from the first sequence the cache lacks.
func (s *Store) start() {
	ctx, cancel := context.WithCancel(context.Background())
	s.stopFollow = cancel
	s.background.Go(func() { s.follow(ctx) })
	s.background.Go(func() { s.compactor(ctx) })
}

// enter starts a transaction: ErrClosed after Close, else the caller must
// call s.life.RUnlock when done.
func (s *Store) enter() error {
	s.life.RLock()
	if s.closed {
		s.life.RUnlock()
		return ledger.ErrClosed
	}
	return nil
}

// CheckWrite reports whether an Update would be refused now by the
// Options' Space guard: nil, or its *diskspace.Error (as the Badger
// store's CheckWrite).
func (s *Store) CheckWrite() error {
	if err := s.opts.Space.Check(); err != nil {
		return fmt.Errorf("ledger: write refused: %w", err)
	}
	return nil
}

// View runs fn in a read-only transaction on the ledger as the local cache
// has it. It first catches up to the stream's last sequence (one request
// to the stream's leader), so that it sees every transaction that
// committed anywhere before it started — read-your-writes across hosts, for
// the price of a round trip; when the stream cannot be reached within the
// Options' Timeout, View fails rather than answer from a stale cache. Its
// writes fail with ledger.ErrReadOnly; fn's error is returned as is.
func (s *Store) View(ctx context.Context, fn func(ledger.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.enter(); err != nil {
		return err
	}
	defer s.life.RUnlock()
	if err := s.catchUp(ctx); err != nil {
		return err
	}
	return s.read(fn)
}

// LocalView runs fn on this host's cache as it has applied the stream so
// far, without catching up first (ledger.LocalViewer): it may miss what
// other hosts committed in the last moments, and never sees anything that
// did not commit. For reads checked again in an Update.
func (s *Store) LocalView(ctx context.Context, fn func(ledger.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.enter(); err != nil {
		return err
	}
	defer s.life.RUnlock()
	if err := s.errBroken(); err != nil {
		return err
	}
	return s.read(fn)
}

// read runs fn read-only on the cache at the applied sequence.
func (s *Store) read(fn func(ledger.Tx) error) error {
	txn := s.db.NewTransactionAt(s.appliedSeq(), false)
	defer txn.Discard()
	tx, end := ledger.OnKV(kvtx.Badger(txn), true)
	err := fn(tx)
	end()
	return err
}

// catchUp waits until the cache has applied the stream's last sequence,
// for at most the Options' Timeout.
func (s *Store) catchUp(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	// Each ask waits publishTimeout, as a publish does: one sent to a node
	// as it went down, or to a stream still settling its leader, goes
	// unanswered, and the next one is answered.
	info, err := jsapi.Retry(ctx, jsapi.Opening(publishTimeout), jsapi.Transient, func(ctx context.Context) (*jetstream.StreamInfo, error) { return s.stream.Info(ctx) })
	if err != nil {
		return fmt.Errorf("ledger/jetstream: the last sequence of %s: %w", s.opts.Stream, err)
	}
	return s.reach(ctx, info.State.LastSeq)
}

// Close stops applying the stream, waits for running transactions and
// closes the cache (waiting for Badger's close until ctx is done, as the
// Badger store's Close). Later transactions fail with ledger.ErrClosed;
// closing again returns nil.
func (s *Store) Close(ctx context.Context) error {
	s.life.Lock()
	defer s.life.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.stopFollow()
	s.background.Wait()
	s.applyMu.Lock()
	s.stopped = true
	s.applyMu.Unlock()
	return s.db.Close(ctx)
}

// timeout returns a context that ends at the Options' Timeout at the
// latest.
func (s *Store) timeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.opts.Timeout)
}

// asking is how the store asks NATS again while it cannot answer — a
// publish, creating its consumer, reading a message the consumer has not
// delivered: each try bounded by perTry, a pause of jsapi.FirstPause after
// each (an Update waiting out a leader election goes on as soon as it is
// over), until ctx ends — an Update's deadline (the caller's, at most the
// Options' Timeout), or Close for the consumer. It is not how an aborted
// transaction runs again: that is contention between hosts (backOff).
func asking(perTry time.Duration) jsapi.Policy {
	p := jsapi.Every(jsapi.FirstPause)
	p.PerTry = perTry
	return p
}

// newID returns a transaction's message id.
func newID() string { return nuid.Next() }
