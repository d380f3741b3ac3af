package jetstream

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// request returns the context of one request to NATS: ctx bounded by the
// RequestTimeout, so that a lost connection gives an error, not a hang.
func (l *Log) request(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, l.opts.RequestTimeout)
}

// noResponderPause is how long a request that no server answered waits
// before it is sent again.
const noResponderPause = 50 * time.Millisecond

// untilAnswered runs f with the context of one request (RequestTimeout)
// again and again while no server answers it at all ("no responders"): a
// replicated stream electing a leader, or a replica catching up before it
// serves direct gets, answers nobody for a moment. Any other outcome, or the
// request's time running out, ends it.
func (l *Log) untilAnswered(ctx context.Context, f func(rctx context.Context) error) error {
	rctx, cancel := l.request(ctx)
	defer cancel()
	for {
		err := f(rctx)
		if !errors.Is(err, nats.ErrNoResponders) && !errors.Is(err, jetstream.ErrNoStreamResponse) {
			return err
		}
		select {
		case <-rctx.Done():
			return err
		case <-time.After(noResponderPause):
		}
	}
}

// fail wraps the error of operation op: the caller's own context error as
// it is (ctx is the caller's, not a request's), anything else naming the
// stream, what went wrong and the state of a connection that is not up.
func (l *Log) fail(ctx context.Context, op string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	var why string
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		why = fmt.Sprintf("no answer from NATS within %v", l.opts.RequestTimeout.Round(time.Millisecond))
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
