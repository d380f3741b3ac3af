package jetstream

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/internal/jsapi"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// Append validates req as every log does (eventlog.NewCommit), reads the
// aggregate's last commit for its version and sequence, and publishes the
// commit expecting that sequence to be still the subject's last: of
// concurrent appends at one version, on any host, one is stored and the
// others fail with ErrVersionConflict (AnyVersion ones read again and
// retry). The first read may come from a replica that is behind; a
// conflict it suggests is confirmed with the stream leader before it is
// reported.
func (l *Log) Append(ctx context.Context, req eventlog.AppendRequest) (eventlog.Commit, error) {
	if err := ctx.Err(); err != nil {
		return eventlog.Commit{}, err
	}
	c, err := eventlog.NewCommit(req)
	if err != nil {
		return eventlog.Commit{}, err
	}
	if err := l.enter(); err != nil {
		return eventlog.Commit{}, err
	}
	defer l.leave()
	if _, ok := ctx.Deadline(); !ok {
		// A caller without a deadline still gets an answer: NATS is asked
		// again for as long as PublishAttempts requests may take.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(l.opts.PublishAttempts)*l.opts.RequestTimeout)
		defer cancel()
	}

	subj := subjectOf(l.opts.Prefix, req.AggregateType, req.AggregateID)
	id := newMsgID() // one per commit: a re-sent publish is a duplicate of its first
	current := l.opts.Replicas == 1
	for {
		last, version, err := l.lastCommit(ctx, subj, req.AggregateType, req.AggregateID, current)
		if err != nil {
			return eventlog.Commit{}, l.fail(ctx, "append", err)
		}
		if err := eventlog.CheckVersion(&req, version); err != nil {
			if !current {
				current = true
				continue
			}
			return eventlog.Commit{}, err
		}
		c.Version = version + 1
		data := eventlog.AppendCommit(make([]byte, 0, eventlog.EncodedSize(&c)), &c)
		if limit := l.nc.MaxPayload(); int64(len(data)) > limit-1024 { // room for the headers
			return eventlog.Commit{}, fmt.Errorf("%w: commit of %d events is %d bytes, more than the NATS server's max payload of %d bytes allows",
				eventlog.ErrInvalid, len(c.Events), len(data), limit)
		}
		pos, dup, err := l.publish(ctx, subj, id, data, last)
		switch {
		case wrongLastSeq(err):
			// Another append came first (or the first read was behind): read
			// the leader's answer and decide again.
			current = true
			continue
		case err != nil:
			return eventlog.Commit{}, l.fail(ctx, "append", err)
		}
		if dup || pos <= last {
			// A duplicate (the stream says so, or it is not after last): an
			// earlier try of this commit was stored at pos and its answer
			// lost without a sign it may have landed (a connection dropped
			// under it, say); the refusal of its repeat sent this loop to
			// read again and to build on it — on a read that may have been
			// behind (a leader cut off from the others still answers), so
			// pos can be past last too. Its version is the stored one, not
			// version+1.
			v, err := l.versionAt(ctx, subj, pos, id, req)
			if err != nil {
				return eventlog.Commit{}, l.fail(ctx, "append", err)
			}
			c.Version = v
		}
		c.Position = pos
		l.raise(pos)
		return c, nil
	}
}

// newMsgID gives each commit its Nats-Msg-Id (a test sets its own).
var newMsgID = nuid.Next

// versionAt returns the version of the commit stored at pos, which must be
// the one published with Nats-Msg-Id id.
func (l *Log) versionAt(ctx context.Context, subj string, pos uint64, id string, req eventlog.AppendRequest) (uint64, error) {
	m, ok, err := l.next(ctx, subj, pos, true)
	switch {
	case err != nil:
		return 0, err
	case !ok || m.seq != pos || m.msgID != id:
		return 0, fmt.Errorf("the stream answered a publish as a duplicate of position %d, which does not hold it", pos)
	}
	stored, err := l.decode(m, req.AggregateType, req.AggregateID)
	return stored.Version, err
}

// AppendMany appends reqs as Append does, each on its own: the stream
// stores each commit when it acknowledges its publish (there is no
// transaction to share), so the requests of different aggregates are
// published at the same time, up to manyParallel of them, and those of one
// aggregate one after another (eventlog.AppendEach).
func (l *Log) AppendMany(ctx context.Context, reqs []eventlog.AppendRequest) []eventlog.AppendOutcome {
	return eventlog.AppendEach(ctx, reqs, manyParallel, l.Append)
}

// manyParallel bounds the publishes one AppendMany waits on at once.
const manyParallel = 32

// lastCommit returns the sequence and version of the aggregate's last
// commit (0, 0 if it has none).
func (l *Log) lastCommit(ctx context.Context, subj, aggregateType, aggregateID string, current bool) (seq, version uint64, err error) {
	m, ok, err := l.last(ctx, subj, current)
	if err != nil || !ok {
		return 0, 0, err
	}
	c, err := l.decode(m, aggregateType, aggregateID)
	if err != nil {
		return 0, 0, err
	}
	return m.seq, c.Version, nil
}

// publish sends the commit expecting lastSeq to be the last sequence on its
// subject and returns its position, and whether the stream had it stored
// already (a duplicate of an earlier try).
func (l *Log) publish(ctx context.Context, subj, id string, data []byte, lastSeq uint64) (pos uint64, dup bool, err error) {
	return l.deliver(ctx, commitMsg(l.opts.Stream, subj, id, data, lastSeq), lastSeq, false)
}

// commitMsg is the message of a commit: its Nats-Msg-Id, and the stream and
// last subject sequence it expects.
func commitMsg(stream, subj, id string, data []byte, lastSeq uint64) *nats.Msg {
	msg := &nats.Msg{Subject: subj, Data: data, Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, id)
	msg.Header.Set(jetstream.ExpectedStreamHeader, stream)
	msg.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(lastSeq, 10))
	return msg
}

// deliver publishes msg until it is acknowledged, asking again while NATS
// cannot answer (jsapi.Ask: a leader election, a node gone under the
// client, an acknowledgement that did not come within RequestTimeout) until
// ctx ends. Every try is the same message with the same Nats-Msg-Id, so at
// most one is stored, and a repeat of a stored one is answered with its
// position — a stored commit is never reported as failed while NATS
// answers. The stream may refuse a repeat of a stored message for its stale
// expected sequence before it looks at the Nats-Msg-Id (a single server
// does), so a refusal after a try that may have reached the stream (resent)
// asks whether the first message stored after lastSeq on the subject is
// this one — the only message that can follow lastSeq there while the
// expectation holds — and returns its position if so.
func (l *Log) deliver(ctx context.Context, msg *nats.Msg, lastSeq uint64, resent bool) (pos uint64, dup bool, err error) {
	id := msg.Header.Get(jetstream.MsgIDHeader)
	pos, err = jsapi.Ask(ctx, l.opts.RequestTimeout, func(rctx context.Context) (uint64, error) {
		ack, err := l.js.PublishMsg(rctx, msg)
		switch {
		case err == nil:
			dup = ack.Duplicate
			return ack.Sequence, nil
		case resent && wrongLastSeq(err):
			m, ok, gerr := l.next(ctx, msg.Subject, lastSeq+1, true)
			if gerr != nil {
				return 0, fmt.Errorf("%w (a repeat of a publish whose acknowledgement was lost was refused, and looking for the first: %w)", err, gerr)
			}
			if ok && m.msgID == id {
				dup = true
				return m.seq, nil
			}
			return 0, err
		case mayHaveReached(err):
			resent = true
		}
		return 0, err
	})
	if err != nil && resent && jsapi.Transient(err) {
		return 0, false, fmt.Errorf("%w (sent again until the caller's time ran out; the commit may or may not be stored)", err)
	}
	return pos, dup, err
}

// wrongLastSeq reports whether the stream refused a publish because the
// subject's last sequence was not the one it expected.
func wrongLastSeq(err error) bool {
	code := apiCode(err)
	return code == jetstream.JSErrCodeStreamWrongLastSequence || code == jetstream.JSErrCodeStreamWrongLastSequenceConstant
}

// mayHaveReached reports whether a publish that failed with err may have
// been stored: its acknowledgement did not come, or an earlier try with its
// Nats-Msg-Id is still being stored. "No responders" and JetStream's other
// refusals mean no server took it.
func mayHaveReached(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || apiCode(err) == jsapi.CodeDupInProcess
}
