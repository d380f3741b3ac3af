package jetstream

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/berthhq/berth/internal/jsapi"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// request returns the context of one request to NATS: ctx bounded by the
// RequestTimeout, so that a lost connection gives an error, not a hang.
func (l *Log) request(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, l.opts.RequestTimeout)
}

// untilAnswered runs f, each run bounded by RequestTimeout, again while
// its error is one NATS gives while it cannot answer yet (jsapi.Transient):
// a replicated stream electing a leader answers nobody, or "not leader",
// and a request sent to a node as it went down is never answered. It asks
// until ctx's deadline — a client's request, which would rather wait out an
// election than fail — or, for a caller without one, for one
// RequestTimeout in all (a subscription's read, which starts over on its
// own). Any other outcome ends it.
func (l *Log) untilAnswered(ctx context.Context, f func(rctx context.Context) error) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = l.request(ctx)
		defer cancel()
	}
	_, err := jsapi.Ask(ctx, l.opts.RequestTimeout, func(rctx context.Context) (struct{}, error) {
		return struct{}{}, f(rctx)
	})
	return err
}

// fail wraps the error of operation op: the caller's cancelling as it is
// (ctx is the caller's, not a request's), anything else — a deadline of the
// caller's that passed while NATS did not answer included — naming the
// stream, what went wrong and the state of a connection that is not up.
func (l *Log) fail(ctx context.Context, op string, err error) error {
	if errors.Is(ctx.Err(), context.Canceled) {
		return ctx.Err()
	}
	var why string
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		why = fmt.Sprintf("no answer from NATS within %v", l.opts.RequestTimeout.Round(time.Millisecond))
		if ctx.Err() != nil {
			why = fmt.Sprintf("no answer from NATS in the caller's time (asked again every %v)", l.opts.RequestTimeout.Round(time.Millisecond))
		}
	case errors.Is(err, nats.ErrNoResponders), errors.Is(err, jetstream.ErrNoStreamResponse):
		why = "no JetStream server answered (is the stream's leader being elected, or is JetStream off?)"
	case errors.Is(err, nats.ErrConnectionClosed):
		why = "the NATS connection is closed"
	}
	if st := l.nc.Status(); st != nats.CONNECTED && why != "the NATS connection is closed" {
		if why != "" {
			why += "; "
		}
		why += "the NATS connection is " + st.String()
	}
	if why != "" {
		return fmt.Errorf("eventlog/jetstream: %s on stream %s: %s: %w", op, l.opts.Stream, why, err)
	}
	return fmt.Errorf("eventlog/jetstream: %s on stream %s: %w", op, l.opts.Stream, err)
}

// apiCode returns the JetStream error code in err, 0 if none.
func apiCode(err error) jetstream.ErrorCode {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode
	}
	return 0
}
