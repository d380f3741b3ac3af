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

// answered is the policy of a request the log asks again while NATS cannot
// answer it yet (jsapi.Transient): a replicated stream electing a leader
// answers nobody, or "not leader", and a request sent to a node as it went
// down is never answered. Each try is bounded by RequestTimeout; the tries
// by ctx's deadline — a client's request, which would rather wait out an
// election than fail — or, for a caller without one, by one RequestTimeout
// in all (a subscription's read, which starts over on its own).
func (l *Log) answered() jsapi.Policy {
	return jsapi.Policy{PerTry: l.opts.RequestTimeout, Within: l.opts.RequestTimeout}
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
