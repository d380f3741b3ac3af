// Package jsapi makes the JetStream API requests that open Berth's streams,
// buckets and object stores on a cluster that may not be able to answer
// yet. A cluster still forming refuses to place a replicated stream ("no
// suitable peers"), one electing a leader answers nobody ("no responders"),
// and — seen with nats-server 2.15 — of several hosts creating the same
// replicated stream at the same moment only one is answered: the others'
// requests time out although the stream is made. Retry sends such a request
// again, each try bounded on its own, until the caller's context ends; the
// next try then finds what the first one made.
//
// Retry is the one loop that asks NATS again, for every part of the host:
// opening streams, publishing, reading, connecting, following a watch, an
// operator call forwarded to another host. Each says how in a Policy (a
// plain struct, zero fields meaning the defaults named here, as Temporal's
// RetryPolicy) and which errors are worth another try; the timeouts and
// pauses they use are named once, below. The one retry of another kind is
// the JetStream ledger's back-off after an aborted transaction: contention
// between hosts, not a NATS that cannot answer (ledger/jetstream's backOff).
//
// The event log, the ledger, the module store and the membership bucket all
// open through it, so every part of a host started beside others on a fresh
// cluster waits the same way, as long as the host's open deadline
// (store.jetstream.open-timeout) allows.
package jsapi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Error codes of JetStream's API a cluster gives while it cannot answer
// yet, which nats.go has no names for.
const (
	codeNoPeers      jetstream.ErrorCode = 10005 // JSClusterNoPeersErrF: no suitable peers for placement
	codeNotAvailable jetstream.ErrorCode = 10008 // JSClusterNotAvailErr: JetStream system temporarily unavailable
	codeNotLeader    jetstream.ErrorCode = 10009 // JSClusterNotLeaderErr: JetStream cluster can not handle request
	// CodeDupInProcess is JSStreamDuplicateMessageConflict: a publish whose
	// Nats-Msg-Id an earlier try carried, which the stream has not finished
	// storing (during an election): asked again, it is answered as a
	// duplicate of the stored one.
	CodeDupInProcess jetstream.ErrorCode = 10158
)

// Transient reports whether err is what a JetStream cluster answers while it
// forms, elects a leader or places a stream — worth trying again — rather
// than a refusal that trying again would only repeat. A request's own
// timeout is transient; the caller's context ending is not (Retry checks
// that apart).
func Transient(err error) bool {
	var apiErr *jetstream.APIError
	var oldAPIErr *nats.APIError
	switch {
	case err == nil:
		return false
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout),
		errors.Is(err, nats.ErrNoResponders), errors.Is(err, jetstream.ErrNoStreamResponse):
		return true
	case errors.Is(err, nats.ErrDisconnected), errors.Is(err, nats.ErrReconnectBufExceeded):
		// A request in flight when the connection dropped (a forced
		// reconnect to another server, a cut link), or one sent while it
		// reconnects: asked again once it is back.
		return true
	case errors.Is(err, os.ErrDeadlineExceeded):
		// An object store's read of an object's chunks that stalled
		// ("read pipe: i/o timeout") on a loaded machine.
		return true
	case errors.As(err, &apiErr):
		return transientCode(apiErr.ErrorCode)
	case errors.As(err, &oldAPIErr):
		// A KV watch's consumer is made through nats.go's older JetStream
		// API, whose errors are its own type with the same codes.
		return transientCode(jetstream.ErrorCode(oldAPIErr.ErrorCode))
	}
	return false
}

// transientCode reports whether a JetStream API error code is one Transient
// asks again for.
func transientCode(c jetstream.ErrorCode) bool {
	return c == codeNoPeers || c == codeNotAvailable || c == codeNotLeader || c == CodeDupInProcess
}

// AwaitLeader returns once the stream named stream has a leader (at once
// for a stream of one replica): a replicated stream just created, or one
// whose leader's server is gone, answers no publish until then, and a part
// that opened before would hand its first writes "no responders". A stream
// not found is waited for too: the caller has just made or found it, and a
// server that has not applied its creation yet says so for a moment. It is
// bounded as Opening says.
func AwaitLeader(ctx context.Context, js jetstream.JetStream, stream string, perTry time.Duration) error {
	_, err := Retry(ctx, Opening(perTry), Transient, func(ctx context.Context) (struct{}, error) {
		s, err := js.Stream(ctx, stream)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			// The caller has just made or found it: a server that has not
			// applied its creation yet answers "not found" for a moment.
			return struct{}{}, fmt.Errorf("%w (not known yet to the server asked: %v)", errNoLeader, err)
		}
		if err != nil {
			return struct{}{}, err
		}
		info := s.CachedInfo()
		if info.Config.Replicas <= 1 || info.Cluster != nil && info.Cluster.Leader != "" {
			return struct{}{}, nil
		}
		return struct{}{}, errNoLeader
	})
	if errors.Is(err, errNoLeader) {
		return fmt.Errorf("stream %s: %w", stream, err)
	}
	return err
}

// Ensure creates or opens a JetStream asset with open, asked again as
// Opening says, then waits for its stream to have a leader (AwaitLeader): a bucket
// or object store whose first write would find none to answer it. stream is
// the asset's stream: "KV_<bucket>", "OBJ_<bucket>", or a stream's name.
func Ensure[T any](ctx context.Context, js jetstream.JetStream, stream string, perTry time.Duration, open func(context.Context) (T, error)) (T, error) {
	v, err := Retry(ctx, Opening(perTry), Transient, open)
	if err != nil {
		return v, err
	}
	return v, AwaitLeader(ctx, js, stream, perTry)
}

// errNoLeader is AwaitLeader's transient "not yet": it wraps
// ErrNoStreamResponse so that Transient takes it as one.
var errNoLeader = fmt.Errorf("no leader elected yet: %w", jetstream.ErrNoStreamResponse)
