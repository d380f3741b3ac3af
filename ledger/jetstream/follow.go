package jetstream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/berthhq/berth/internal/jsapi"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The store follows the stream with a consumer of its own rather than
// nats.go's ordered consumer: when the node holding the consumer goes down,
// the ordered consumer notices the silence, then waits up to ten seconds
// (hard-coded) for its request to create the next one, which an electing
// cluster may not answer — an Update waiting for its transaction waited as
// long. This one is created again at once, from the sequence after the last
// applied, each attempt waiting consumerCreateTimeout; and an Update whose
// transaction the consumer has not delivered soon after the stream took it
// reads what it lacks from the stream by sequence (fillTo), which a healthy
// stream leader answers at once whatever became of the consumer.

// consumerHeartbeat is how often the server tells the consumer it is alive
// while no transaction comes (the least nats.go takes). Two missed and the
// consumer is given up and created again.
const consumerHeartbeat = 500 * time.Millisecond

// consumerCreateTimeout bounds one attempt to create the consumer; a
// request lost with its node, or not answered while the stream elects a
// leader, is made again after it.
const consumerCreateTimeout = time.Second

// pullAttempts bounds how many times follow pulls from one consumer that
// a pull reached no server of (drain): pausing jsapi.FirstPause, doubled
// each time, between them, about as long as two missed heartbeats.
const pullAttempts = 5

// consumerInactive is how long the server keeps a consumer nobody pulls
// from: the ones given up, and the one of a host that stopped without
// Close, go away by themselves.
const consumerInactive = 30 * time.Second

// follow applies the stream until ctx ends, creating a consumer from the
// sequence after the last applied whenever the one it has fails.
func (s *Store) follow(ctx context.Context) {
	for ctx.Err() == nil {
		s.delivering.Store(false)
		cons, err := s.newConsumer(ctx)
		if err != nil {
			return // ctx ended
		}
		// A pull "no responders" answered is asked again of the same
		// consumer (drain), then a new one is made.
		var delivered uint64
		_, err = jsapi.Retry(ctx, jsapi.Policy{Within: jsapi.UntilDone, Attempts: pullAttempts},
			func(err error) bool { return errors.Is(err, nats.ErrNoResponders) },
			func(ctx context.Context) (struct{}, error) { return struct{}{}, s.drain(ctx, cons, &delivered) })
		switch {
		case ctx.Err() != nil:
		case errors.Is(err, errGap):
			if err := s.restoreBehind(ctx); err != nil && ctx.Err() == nil {
				s.fail(err)
				return
			}
		case err != nil:
			s.opts.Logger.Debug("ledger: stream consumer given up, creating another", "err", err.Error())
		}
	}
}

// newConsumer creates an ephemeral consumer that delivers the stream from
// the sequence after the last applied, trying again until ctx ends.
func (s *Store) newConsumer(ctx context.Context) (jetstream.Consumer, error) {
	cons, err := jsapi.Retry(ctx, asking(consumerCreateTimeout), jsapi.Always, func(actx context.Context) (jetstream.Consumer, error) {
		cons, err := s.stream.CreateConsumer(actx, jetstream.ConsumerConfig{
			Description:       "a Berth host's ledger cache",
			DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
			OptStartSeq:       s.appliedSeq() + 1,
			AckPolicy:         jetstream.AckNonePolicy,
			MemoryStorage:     true,
			Replicas:          1,
			InactiveThreshold: consumerInactive,
		})
		if err != nil && ctx.Err() == nil {
			s.opts.Logger.Debug("ledger: creating the stream consumer", "err", err.Error())
		}
		return cons, err
	})
	if err != nil {
		return nil, ctx.Err()
	}
	return cons, nil
}

// errConsumerGap means the consumer skipped a delivery (it was reset on
// the server, say): it is replaced by one that starts where the cache is.
var errConsumerGap = errors.New("ledger/jetstream: the stream consumer skipped a delivery")

// drain applies what cons delivers until it fails, a heartbeat is missed,
// or ctx ends; delivered is the consumer's last delivery applied, kept
// from one drain of cons to the next.
//
// It consumes with a callback rather than an iterator (Messages) for the
// one error the iterator swallows: a pull that reached no server. A
// consumer just created is not yet known to every server of a cluster —
// its pull subject's interest spreads over the routes — so the host's
// server may answer the first pull "no responders"; the iterator then waited
// two heartbeats for deliveries that could not come, while the other hosts
// went on (and compacted past this one). Told
// of it, follow pulls again at once.
func (s *Store) drain(ctx context.Context, cons jetstream.Consumer, delivered *uint64) error {
	// mu orders the callbacks, the error handler and drain's return: once
	// stopped, nothing of this drain applies a delivery or counts it.
	var mu sync.Mutex
	stopped := false
	ended := make(chan error, 1)
	end := func(err error) {
		if !stopped {
			stopped = true
			ended <- err
		}
	}
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		if err := s.deliver(msg, delivered); err != nil {
			end(err)
		}
	}, jetstream.PullHeartbeat(consumerHeartbeat), jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		// The errors the iterator returned, and "no responders".
		if errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoHeartbeat) ||
			errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrBadRequest) {
			mu.Lock()
			end(err)
			mu.Unlock()
		}
	}))
	if err != nil {
		return err
	}
	defer func() {
		cc.Stop()
		mu.Lock()
		stopped = true
		mu.Unlock()
	}()
	select {
	case err := <-ended:
		return err
	case <-cc.Closed():
		return jetstream.ErrMsgIteratorClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// deliver applies the consumer's delivery msg, the one after delivered.
func (s *Store) deliver(msg jetstream.Msg, delivered *uint64) error {
	meta, err := msg.Metadata()
	if err != nil {
		return fmt.Errorf("ledger/jetstream: a stream message without metadata: %w", err)
	}
	if meta.Sequence.Consumer != *delivered+1 {
		return fmt.Errorf("%w: delivery %d after %d", errConsumerGap, meta.Sequence.Consumer, *delivered)
	}
	*delivered = meta.Sequence.Consumer
	s.delivering.Store(true)
	return s.handle(meta.Sequence.Stream, msg.Headers().Get(jetstream.MsgIDHeader), msg.Data())
}

// fillDelay is how long an Update waits for the consumer to deliver its
// transaction before it reads it from the stream itself.
const fillDelay = 250 * time.Millisecond

// fillTimeout bounds one read of a message by sequence.
const fillTimeout = time.Second

// fillTo reads from the stream, by sequence, what the cache lacks up to seq
// and applies it. It is the way around a consumer that went down with its
// node: the stream's leader (the one that just took the transaction) answers
// at once. It returns when the cache has applied seq or ctx ends.
func (s *Store) fillTo(ctx context.Context, seq uint64) error {
	for {
		next := s.appliedSeq() + 1
		if next > seq {
			return nil
		}
		raw, err := jsapi.Retry(ctx, asking(fillTimeout), jsapi.Always, func(actx context.Context) (*jetstream.RawStreamMsg, error) {
			if err := s.errBroken(); err != nil {
				return nil, jsapi.Permanent(err)
			}
			if s.appliedSeq() >= next {
				return nil, nil // the consumer delivered it meanwhile
			}
			raw, err := s.stream.GetMsg(actx, next)
			if errors.Is(err, jetstream.ErrMsgNotFound) && s.purgedPast(ctx, next) {
				return nil, jsapi.Permanent(errPurgedPast)
			}
			return raw, err
		})
		switch {
		case errors.Is(err, errPurgedPast):
			// Purged past the cache: the consumer meets the gap too, and
			// follow restores the cache from the snapshot.
			return s.waitApplied(ctx, seq)
		case err != nil && ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			return err // broken
		case raw != nil:
			// It is the next one: no gap.
			_ = s.handle(raw.Sequence, raw.Header.Get(jetstream.MsgIDHeader), raw.Data)
		}
	}
}

// errPurgedPast is fillTo's: the stream starts after the message wanted.
var errPurgedPast = errors.New("ledger/jetstream: the stream was purged past the cache")

// purgedPast reports whether the stream now starts after seq. A leader
// just elected may answer that a message it has not applied yet is not
// found; only a stream that starts later has truly lost it.
func (s *Store) purgedPast(ctx context.Context, seq uint64) bool {
	actx, cancel := context.WithTimeout(ctx, fillTimeout)
	defer cancel()
	info, err := s.stream.Info(actx)
	return err == nil && info.State.FirstSeq > seq
}

// reach waits until the cache has applied seq: for the consumer to deliver
// it, and after fillDelay, reading from the stream what is still lacking —
// at once while the consumer has delivered nothing yet (delivering): one
// just made may be unreachable for a while (drain), during which the
// other hosts go on and may compact past this one.
func (s *Store) reach(ctx context.Context, seq uint64) error {
	if s.delivering.Load() {
		wctx, cancel := context.WithTimeout(ctx, fillDelay)
		err := s.waitApplied(wctx, seq)
		cancel()
		if err == nil || ctx.Err() != nil || s.errBroken() != nil {
			return s.waitApplied(ctx, seq)
		}
	}
	if err := s.fillTo(ctx, seq); err != nil {
		return fmt.Errorf("ledger/jetstream: catching up to stream sequence %d (applied %d): %w", seq, s.appliedSeq(), err)
	}
	return nil
}
