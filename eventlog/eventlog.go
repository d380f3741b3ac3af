// Package eventlog is Berth's event source: an append-only log of commits,
// each holding one or more events of one aggregate at one version, with a
// global position. The embedded implementation, Badger, keeps it under the
// host's data directory; eventlog/jetstream keeps it in a NATS JetStream
// stream that several hosts share. Both implement Log and pass the same
// contract suite, eventlog/logtest.
//
// What every implementation shares is owned here, once: the rules an append
// is checked by (NewCommit, CheckVersion, MaxNameLen), the stored form of a
// commit (AppendCommit, DecodeCommit), the default read limit, and the
// partition of an aggregate (PartitionOf), which the subscription engine and
// the JetStream subjects both depend on and which must never change.
package eventlog

import (
	"context"
	"errors"
	"time"
)

// Errors returned by every Log implementation.
var (
	// ErrVersionConflict means the aggregate is not at the expected version.
	ErrVersionConflict = errors.New("eventlog: version conflict")
	// ErrEmptyCommit means an append carried no events.
	ErrEmptyCommit = errors.New("eventlog: commit has no events")
	// ErrInvalid means an append was malformed (missing names, bad JSON).
	ErrInvalid = errors.New("eventlog: invalid append")
	// ErrClosed means the log was closed.
	ErrClosed = errors.New("eventlog: closed")
)

// AnyVersion as AppendRequest.ExpectedVersion appends whatever the
// aggregate's current version is.
const AnyVersion int64 = -1

// Event is one event of a commit.
type Event struct {
	Type    string // e.g. "OrderShipped"
	Payload []byte // JSON
}

// Commit is one append: the events of one aggregate at one version.
type Commit struct {
	Position      uint64 // global position, from 1, without gaps
	AggregateType string
	AggregateID   string
	Version       uint64 // the aggregate's version after this commit: 1, 2, 3 …
	OwnerID       string
	Time          time.Time
	Events        []Event
	// Traceparent is the W3C traceparent the appender sent with the
	// commit ("" when none): the delivery's trace continues it.
	Traceparent string
}

// AppendRequest asks for one commit.
type AppendRequest struct {
	AggregateType string
	AggregateID   string
	// ExpectedVersion is the aggregate's version before the append: 0 for a
	// new aggregate, AnyVersion to skip the check.
	ExpectedVersion int64
	OwnerID         string
	Events          []Event
	Time            time.Time // zero: now
	// Traceparent is the appender's W3C traceparent, kept with the commit
	// (at most MaxNameLen bytes; "" when none).
	Traceparent string
}

// AppendOutcome is what became of one request of AppendMany: its commit,
// as Append returns it, or the error Append would have returned.
type AppendOutcome struct {
	Commit Commit
	Err    error
}

// Log is an event source.
type Log interface {
	// Append writes one commit atomically and returns it with its position
	// and version. It fails with ErrVersionConflict (wrapped, naming the
	// versions) when ExpectedVersion does not match.
	Append(ctx context.Context, req AppendRequest) (Commit, error)
	// AppendMany appends each request as Append does, each on its own
	// (a batch append): each commit is atomic, none is atomic with another,
	// and one's conflict or refusal leaves the others to be appended.
	// Requests of one aggregate are appended in their order, so a later
	// one is checked against the version an earlier one wrote. It returns
	// one outcome per request, in order, once every one is decided: an
	// appended commit is as durable as Append's (with SyncWrites, the
	// batch shares the log's fsyncs instead of waiting for one each).
	AppendMany(ctx context.Context, reqs []AppendRequest) []AppendOutcome
	// Read returns up to limit commits with Position >= from, in order.
	Read(ctx context.Context, from uint64, limit int) ([]Commit, error)
	// ReadAggregate returns up to limit commits of one aggregate with
	// Version >= fromVersion, in version order.
	ReadAggregate(ctx context.Context, aggregateType, aggregateID string, fromVersion uint64, limit int) ([]Commit, error)
	// Head returns the position of the last commit (0 for an empty log).
	Head(ctx context.Context) (uint64, error)
	// Version returns an aggregate's current version (0 if it has none).
	Version(ctx context.Context, aggregateType, aggregateID string) (uint64, error)
	// Wait blocks until Head() > after, or ctx is done.
	Wait(ctx context.Context, after uint64) error
	// Close releases the log.
	Close(ctx context.Context) error
}
