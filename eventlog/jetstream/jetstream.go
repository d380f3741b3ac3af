// Package jetstream is the event log on NATS JetStream: a second backend of
// eventlog.Log, for several Berth hosts sharing one log, that passes the
// same contract suite (eventlog/logtest) as the embedded Badger log.
//
// The log is one stream. A commit is one message holding the commit in
// eventlog's codec (eventlog.AppendCommit), published on its aggregate's
// subject (a token per aggregate type and id); its position is the stream sequence. Positions are
// gapless as long as nothing is deleted from the stream: the stream is
// created with deletes and purges denied and without limits, and Open
// refuses a stream that has limits. Appends are optimistic per aggregate:
// the aggregate's last message gives its version and sequence, and the
// publish carries Nats-Expected-Last-Subject-Sequence, so of two hosts
// appending at one version only one is stored; a Nats-Msg-Id makes a
// publish re-sent after a lost acknowledgement land once.
//
// Reads use batched direct gets. On a replicated stream a direct get may be
// answered by a follower that is a little behind the leader; what this log
// knows to exist (its own appends, Head, what Wait saw) it completes from
// the stream leader, so a caller reads its own writes.
package jetstream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/berthhq/berth/eventlog"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Log is the event log in a JetStream stream. It is safe for concurrent use
// and shares its connection with the rest of the host: Close releases what
// the log made (its watcher), not the connection.
type Log struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	stream jetstream.Stream
	opts   Options

	// floor is the highest position this log knows to exist: its own
	// appends, Head, reads and the watcher raise it (floor.go).
	floor atomic.Uint64

	waitMu sync.Mutex
	// changed is closed and replaced whenever floor rises, waking Wait.
	changed chan struct{}

	watch  jetstream.ConsumeContext // the tail watcher (watch.go)
	status chan nats.Status         // the connection's CLOSED, for Wait
	// connClosed is closed when the connection closes for good.
	connClosed chan struct{}

	mu      sync.Mutex
	closed  bool
	running int           // calls in progress
	done    chan struct{} // closed by Close
	idle    chan struct{} // closed once closed and running is 0
}

var _ eventlog.Log = (*Log)(nil)

// Open opens the log in the stream opts names over nc, creating the stream
// if there is none, and refusing (with an error naming each difference) one
// whose configuration does not fit (stream.go). Open is bounded by ctx's
// deadline or, without one, each of its requests by RequestTimeout. nc
// stays the caller's.
func Open(ctx context.Context, nc *nats.Conn, opts Options) (*Log, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("eventlog/jetstream: %w", err)
	}
	if nc == nil || nc.IsClosed() {
		return nil, errors.New("eventlog/jetstream: open: the NATS connection is closed")
	}
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(opts.RequestTimeout))
	if err != nil {
		return nil, fmt.Errorf("eventlog/jetstream: open: %w", err)
	}
	l := &Log{
		nc: nc, js: js, opts: opts,
		changed: make(chan struct{}), connClosed: make(chan struct{}),
		done: make(chan struct{}), idle: make(chan struct{}),
	}
	if l.stream, err = l.ensureStream(ctx); err != nil {
		return nil, err
	}
	head := l.stream.CachedInfo().State.LastSeq
	l.raise(head)
	l.status = nc.StatusChanged(nats.CLOSED)
	go l.watchConn()
	if err := l.startWatch(ctx, head); err != nil {
		nc.RemoveStatusListener(l.status)
		return nil, err
	}
	return l, nil
}

// enter starts a call: it fails with ErrClosed after Close, else the caller
// must call leave when done.
func (l *Log) enter() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return eventlog.ErrClosed
	}
	l.running++
	return nil
}

func (l *Log) leave() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.running--
	if l.closed && l.running == 0 {
		close(l.idle)
	}
}

// Close stops the watcher, wakes every Wait with ErrClosed and waits for
// running calls until ctx is done (then it returns an error saying how many
// still run; they end at their own request timeouts). Later calls fail with
// ErrClosed; closing again returns nil. The connection stays open.
func (l *Log) Close(ctx context.Context) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	close(l.done)
	if l.running == 0 {
		close(l.idle)
	}
	l.mu.Unlock()

	l.watch.Stop()
	l.nc.RemoveStatusListener(l.status)
	select {
	case <-l.watch.Closed():
	case <-ctx.Done():
	}
	select {
	case <-l.idle:
		return nil
	case <-ctx.Done():
		l.mu.Lock()
		n := l.running
		l.mu.Unlock()
		return fmt.Errorf("eventlog/jetstream: close of stream %s: %d calls still running: %w", l.opts.Stream, n, ctx.Err())
	}
}

// watchConn closes connClosed when the connection closes for good, so that
// Wait returns an error instead of waiting for appends that cannot come.
func (l *Log) watchConn() {
	for s := range l.status {
		if s == nats.CLOSED {
			close(l.connClosed)
			return
		}
	}
}
