package jetstream

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/berthhq/berth/internal/jsapi"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/ledger/internal/kvtx"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// headerRoom is what a message's headers (its id) may take of the server's
// max payload.
const headerRoom = 256

// Update runs fn in a read-write transaction on the ledger as this host
// has applied it, and commits it when fn returns nil: its message goes to
// the stream, and Update returns once this host has applied it. When a
// transaction of another host committed first something fn read, the
// transaction aborts and fn runs again on the ledger as it is now — so fn
// may run more than once and must have no effect outside the Tx — up to the
// Options' MaxAttempts (then ErrConflict). As the Badger store's Update:
// nothing is committed when fn returns an error (returned as is), when a
// write in it failed (that error, even if fn ignored it), or when ctx is
// done by the time fn returns; a transaction larger than the server's max
// payload fails with ledger.ErrTooBig; a transaction that writes nothing
// publishes nothing, but reads what is current (as a View). While the Space guard refuses writes, Update fails with
// its *diskspace.Error without calling fn.
//
// When the stream cannot be reached within the Options' Timeout, Update
// fails; if its message reached the stream but the acknowledgement was
// lost, the transaction may still commit (as with any networked store).
func (s *Store) Update(ctx context.Context, fn func(ledger.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.enter(); err != nil {
		return err
	}
	defer s.life.RUnlock()
	select {
	case s.updating <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("ledger: an earlier update still holds the ledger (NATS slow or out of reach?): %w", ctx.Err())
	}
	defer func() { <-s.updating }()
	if err := s.CheckWrite(); err != nil {
		return err
	}
	for n := range s.opts.MaxAttempts {
		if err := s.errBroken(); err != nil {
			return err
		}
		s.yield(ctx)
		committed, err := s.attempt(ctx, fn)
		if err != nil || committed {
			return err
		}
		backOff(ctx, n)
	}
	return fmt.Errorf("%w: %d attempts", ErrConflict, s.opts.MaxAttempts)
}

// attempt runs fn once on the ledger at the applied sequence and commits
// what it wrote; committed is false when the transaction aborted on a
// conflict.
func (s *Store) attempt(ctx context.Context, fn func(ledger.Tx) error) (committed bool, err error) {
	snapshot := s.appliedSeq()
	txn := s.db.NewTransactionAt(snapshot, true)
	defer txn.Discard()
	rec := newRecorder(kvtx.Badger(txn), s.recent, snapshot)
	tx, end := ledger.OnKV(rec, false)
	err = fn(tx)
	written, txErr := end()
	switch {
	case err != nil:
		return false, err
	case txErr != nil:
		return false, txErr
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if len(rec.writes) == 0 {
		return s.readOnlyCurrent(ctx, rec, snapshot)
	}
	// Every host applies the writes with the applied sequence in one Badger
	// transaction: make sure they fit in one here, where Badger's limits are
	// the same.
	if err := txn.Set(appliedKey, binary.BigEndian.AppendUint64(nil, snapshot)); err != nil {
		return false, fmt.Errorf("ledger: commit: %w: %w", ledger.ErrTooBig, err)
	}
	data := messageOf(rec, snapshot).encode()
	if int64(len(data))+headerRoom > s.maxPayload {
		return false, fmt.Errorf("%w: its message is %d bytes, the server takes %d", ledger.ErrTooBig, len(data), s.maxPayload)
	}
	committed, err = s.commit(ctx, data)
	if committed {
		s.opts.Space.Wrote(written)
	}
	return committed, err
}

// readOnlyCurrent decides an Update that wrote nothing: it publishes
// nothing, but what it read must be as current as a View's (the caller acts
// on it — an engine restarting from checkpoints another host has just
// reset), so the cache catches up with the stream, and if anything the
// closure read changed after its snapshot the closure runs again.
func (s *Store) readOnlyCurrent(ctx context.Context, rec *recorder, snapshot uint64) (bool, error) {
	if len(rec.reads) == 0 && len(rec.ranges) == 0 {
		return true, nil
	}
	if err := s.catchUp(ctx); err != nil {
		return false, err
	}
	now := s.appliedSeq()
	if now == snapshot {
		return true, nil
	}
	changed, err := s.conflicts(messageOf(rec, snapshot), now+1)
	return !changed, err
}

// commit publishes a transaction and waits until this host has applied it.
func (s *Store) commit(ctx context.Context, data []byte) (bool, error) {
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	id := newID()
	outcome := make(chan bool, 1)
	s.mu.Lock()
	s.waiters[id] = outcome
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.waiters, id)
		s.mu.Unlock()
	}()
	ack, err := s.publish(ctx, id, data)
	if err != nil {
		return false, err
	}
	seq := ack.Sequence
	if err := s.reach(ctx, seq); err != nil {
		return false, fmt.Errorf("%w: %w", errNoOutcome, err)
	}
	select {
	case committed := <-outcome:
		return committed, nil
	default:
		// Applied, yet not ours: the stream took the message id before (a
		// retried publish the server deduplicated, pointing at an earlier
		// message this host skipped).
		return false, fmt.Errorf("%w: stream sequence %d was applied without it", errNoOutcome, seq)
	}
}

// publishTimeout bounds one attempt to publish a transaction.
const publishTimeout = 2 * time.Second

// publish puts the message on the stream, asking again with the same id
// (which the stream deduplicates) until it is acknowledged or ctx ends, as
// the event log's append does: ctx is the Update's, the caller's deadline
// (a REST write's server.write-timeout) or the Options' Timeout, whichever
// comes first. Every error but a message too big is asked again.
func (s *Store) publish(ctx context.Context, id string, data []byte) (*jetstream.PubAck, error) {
	// One try waits publishTimeout for its acknowledgement: one sent to a
	// node as it went down is never answered.
	ack, err := jsapi.Retry(ctx, asking(publishTimeout), jsapi.Always, func(actx context.Context) (*jetstream.PubAck, error) {
		msg := &nats.Msg{Subject: s.opts.Subject, Data: data, Header: nats.Header{}}
		ack, err := s.js.PublishMsg(actx, msg, jetstream.WithMsgID(id), jetstream.WithExpectStream(s.opts.Stream))
		if errors.Is(err, nats.ErrMaxPayload) {
			return nil, jsapi.Permanent(fmt.Errorf("%w: %w", ledger.ErrTooBig, err))
		}
		return ack, err
	})
	var gaveUp *jsapi.GaveUp
	if errors.As(err, &gaveUp) {
		return nil, fmt.Errorf("ledger/jetstream: publishing to %s: %w (%w)", s.opts.Subject, gaveUp.Err, context.Cause(ctx))
	}
	return ack, err
}

// Back-off after an aborted attempt: a random pause up to abortPause
// doubled per abort of the same Update, at most maxAbortPause. It is a
// concept of its own, not a NATS that cannot answer (jsapi.Retry, asking):
// the stream took the transaction, and another host's commit won the race
// for what it read; the pause, random and growing, parts hosts that keep
// meeting on one key.
const (
	abortPause    = time.Millisecond
	maxAbortPause = 50 * time.Millisecond
)

// backOff pauses after the n-th (from 0) aborted attempt of an Update. yield
// orders two hosts that take turns on a key; it cannot part several that
// keep meeting on one (a loaded machine, several writers on each host),
// where the same host can win again and again: a random pause growing with
// each abort makes a run of MaxAttempts losses unlikely past any load.
func backOff(ctx context.Context, n int) {
	t := time.NewTimer(rand.N(min(abortPause<<min(n, 16), maxAbortPause)))
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
