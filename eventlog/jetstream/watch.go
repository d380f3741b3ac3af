package jetstream

import (
	"context"
	"errors"
	"fmt"

	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/internal/jsapi"
	"github.com/nats-io/nats.go/jetstream"
)

// startWatch follows the stream's tail from after head with an ordered
// consumer that delivers headers only, raising floor as commits are stored
// by any host: that is what wakes Wait for appends of other processes.
// nats.go recreates an ordered consumer that a server restart or a lost
// heartbeat broke, from the last sequence it delivered.
func (l *Log) startWatch(ctx context.Context, head uint64) error {
	cons, err := jsapi.Retry(ctx, jsapi.Opening(l.opts.RequestTimeout), jsapi.Transient, func(rctx context.Context) (jetstream.Consumer, error) {
		return l.stream.OrderedConsumer(rctx, jetstream.OrderedConsumerConfig{
			DeliverPolicy: jetstream.DeliverByStartSequencePolicy,
			OptStartSeq:   head + 1,
			HeadersOnly:   true,
		})
	})
	if err != nil {
		return l.fail(context.WithoutCancel(ctx), "open: tail watcher", err)
	}
	l.watch, err = cons.Consume(func(m jetstream.Msg) {
		if meta, err := m.Metadata(); err == nil {
			l.raise(meta.Sequence.Stream)
		}
	})
	if err != nil {
		return l.fail(ctx, "open: tail watcher", err)
	}
	return nil
}

// Head returns the position of the last commit (0 for an empty log), from
// the stream leader's state.
func (l *Log) Head(ctx context.Context) (uint64, error) {
	if err := l.enter(); err != nil {
		return 0, err
	}
	defer l.leave()
	info, err := jsapi.Retry(ctx, l.answered(), jsapi.Transient, func(rctx context.Context) (*jetstream.StreamInfo, error) {
		return l.stream.Info(rctx)
	})
	if err != nil {
		return 0, l.fail(ctx, "head", err)
	}
	head := info.State.LastSeq
	l.raise(head)
	return head, nil
}

// errConnClosed is Wait's error once the connection has closed for good.
var errConnClosed = errors.New("the NATS connection is closed")

// Wait blocks until a commit past after is known to exist — this log's own
// appends, or any host's as the tail watcher sees them — or ctx is done
// (returning ctx's error), or the log is closed (ErrClosed), or the NATS
// connection closed for good (an error saying so). While the connection is
// down and reconnecting, Wait waits: no commit can be stored meanwhile.
func (l *Log) Wait(ctx context.Context, after uint64) error {
	for {
		// Take the channel before reading floor, so a raise between the two
		// closes the channel this Wait is about to block on.
		l.waitMu.Lock()
		changed := l.changed
		l.waitMu.Unlock()
		select {
		case <-l.done:
			return eventlog.ErrClosed
		default:
		}
		if l.floor.Load() > after {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		case <-l.done:
			return eventlog.ErrClosed
		case <-l.connClosed:
			return fmt.Errorf("eventlog/jetstream: wait on stream %s: %w", l.opts.Stream, errConnClosed)
		}
	}
}
