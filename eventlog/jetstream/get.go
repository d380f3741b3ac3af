package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/berthhq/berth/internal/jsapi"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"
)

// stored is a message of the stream as the log reads it: its sequence (the
// commit's position), its data (the encoded commit) and the Nats-Msg-Id it
// was published with.
type stored struct {
	seq   uint64
	data  []byte
	msgID string
}

// last returns the last message on subj (found false if there is none).
// With current, the answer comes from the stream leader, so that it holds
// every acknowledged append; without, any replica may answer a direct get,
// and a follower may be a little behind. A stream of one replica answers
// current either way.
func (l *Log) last(ctx context.Context, subj string, current bool) (m stored, ok bool, err error) {
	_, err = jsapi.Retry(ctx, l.answered(), jsapi.Transient, func(rctx context.Context) (struct{}, error) {
		if current && l.opts.Replicas > 1 {
			m, ok, err = l.leaderGet(rctx, msgGetRequest{LastFor: subj})
		} else {
			m, ok, err = found(l.stream.GetLastMsgForSubject(rctx, subj))
		}
		return struct{}{}, err
	})
	return m, ok, err
}

// next returns the first message on subj (which may hold wildcards) at or
// after seq, as last does.
func (l *Log) next(ctx context.Context, subj string, seq uint64, current bool) (m stored, ok bool, err error) {
	_, err = jsapi.Retry(ctx, l.answered(), jsapi.Transient, func(rctx context.Context) (struct{}, error) {
		if current && l.opts.Replicas > 1 {
			m, ok, err = l.leaderGet(rctx, msgGetRequest{Seq: seq, NextFor: subj})
		} else {
			m, ok, err = found(l.stream.GetMsg(rctx, seq, jetstream.WithGetMsgSubject(subj)))
		}
		return struct{}{}, err
	})
	return m, ok, err
}

func found(m *jetstream.RawStreamMsg, err error) (stored, bool, error) {
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return stored{}, false, nil
	case err != nil:
		return stored{}, false, err
	}
	return stored{seq: m.Sequence, data: m.Data, msgID: m.Header.Get(jetstream.MsgIDHeader)}, true, nil
}

// batch returns up to n messages on subj from seq on, in one
// batched direct get: any replica may answer, so on a replicated stream the
// answer may end early (read.go completes it). It ends early too where the
// server's byte budget for one batch runs out.
func (l *Log) batch(ctx context.Context, seq uint64, subj string, n int) (out []stored, err error) {
	opts := []jetstreamext.GetBatchOpt{jetstreamext.GetBatchSeq(max(seq, 1))}
	// The stream holds nothing but the log: a batch of all of it needs no
	// filter, which saves the server matching every subject.
	if subj != allSubjects(l.opts.Prefix) {
		opts = append(opts, jetstreamext.GetBatchSubject(subj))
	}
	_, err = jsapi.Retry(ctx, l.answered(), jsapi.Transient, func(rctx context.Context) (struct{}, error) {
		out = make([]stored, 0, min(n, 256))
		msgs, err := jetstreamext.GetBatch(rctx, l.js, l.opts.Stream, n, opts...)
		if err != nil {
			return struct{}{}, err
		}
		for m, err := range msgs {
			if errors.Is(err, jetstreamext.ErrNoMessages) {
				break
			}
			if err != nil {
				return struct{}{}, err
			}
			out = append(out, stored{seq: m.Sequence, data: m.Data, msgID: m.Header.Get(jetstream.MsgIDHeader)})
		}
		// The iterator ends quietly when the request's deadline passes:
		// that is a timeout, not the end of the log.
		return struct{}{}, rctx.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// msgGetRequest is JetStream's STREAM.MSG.GET request.
type msgGetRequest struct {
	Seq     uint64 `json:"seq,omitempty"`
	LastFor string `json:"last_by_subj,omitempty"`
	NextFor string `json:"next_by_subj,omitempty"`
}

// msgGetResponse is its answer.
type msgGetResponse struct {
	Error   *jetstream.APIError `json:"error,omitempty"`
	Message *struct {
		Sequence uint64 `json:"seq"`
		Header   []byte `json:"hdrs,omitempty"`
		Data     []byte `json:"data,omitempty"`
	} `json:"message,omitempty"`
}

// leaderGet asks the stream leader for one message. nats.go sends its gets
// as direct gets whenever the stream allows them (and this stream must, for
// the batched reads), so the leader's API is called here by hand.
func (l *Log) leaderGet(ctx context.Context, req msgGetRequest) (stored, bool, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return stored{}, false, err
	}
	msg, err := l.nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+l.opts.Stream, body)
	if err != nil {
		return stored{}, false, err
	}
	var resp msgGetResponse
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return stored{}, false, fmt.Errorf("stream message get: malformed answer: %w", err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound:
		return stored{}, false, nil
	case resp.Error != nil:
		return stored{}, false, resp.Error
	case resp.Message == nil:
		return stored{}, false, errors.New("stream message get: answer without a message")
	}
	m := stored{seq: resp.Message.Sequence, data: resp.Message.Data}
	if len(resp.Message.Header) > 0 {
		h, err := nats.DecodeHeadersMsg(resp.Message.Header)
		if err != nil {
			return stored{}, false, fmt.Errorf("stream message get: headers of position %d: %w", m.seq, err)
		}
		m.msgID = h.Get(jetstream.MsgIDHeader)
	}
	return m, true, nil
}
