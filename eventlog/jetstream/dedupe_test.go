package jetstream

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/internal/testing/natstest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"
)

// A commit whose acknowledgement was lost is sent again by Append with the
// same Nats-Msg-Id: it is stored once, and the repeat returns the first
// one's position, on one node and on R3. Meanwhile a new commit with the
// same (now stale) expectation is refused.
func TestRepeatAfterLostAckIsStoredOnce(t *testing.T) {
	for _, tc := range []struct {
		name     string
		replicas int
	}{{"single", 1}, {"R3", 3}} {
		t.Run(tc.name, func(t *testing.T) {
			urls := ""
			if tc.replicas == 1 {
				urls = natstest.RunServer(t).URL()
			} else {
				urls = natstest.RunCluster(t, 3).URLs()
			}
			nc, err := nats.Connect(urls)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			l, err := Open(ctx, nc, Options{Replicas: tc.replicas})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close(ctx)

			c := eventlog.Commit{AggregateType: "order", AggregateID: "o-1", Version: 1, Time: time.Now().UTC(),
				Events: []eventlog.Event{{Type: "Placed", Payload: []byte(`{}`)}}}
			subj := subjectOf(l.opts.Prefix, c.AggregateType, c.AggregateID)
			msg := commitMsg(l.opts.Stream, subj, nuid.Next(), eventlog.AppendCommit(nil, &c), 0)
			// The first attempt: stored, its acknowledgement thrown away as
			// if lost — the server holds the same either way. (A publish with
			// no reply subject, which loses it for real, is dropped unseen
			// when the new R3 stream's interest has not reached this node.)
			if _, err := nc.RequestMsg(msg, 10*time.Second); err != nil {
				t.Fatal(err)
			}
			checkfor.Nil(t, 10*time.Second, 5*time.Millisecond, func() error {
				h, err := l.Head(ctx)
				if err == nil && h != 1 {
					err = fmt.Errorf("head %d, want the first attempt stored at 1", h)
				}
				return err
			})
			pos, dup, err := l.deliver(ctx, msg, 0, true)
			if err != nil || pos != 1 || !dup {
				t.Fatalf("the repeat: position %d, duplicate %v, %v; want 1, a duplicate", pos, dup, err)
			}
			other := commitMsg(l.opts.Stream, subj, nuid.Next(), eventlog.AppendCommit(nil, &c), 0)
			if _, _, err := l.deliver(ctx, other, 0, false); !wrongLastSeq(err) {
				t.Fatalf("another commit expecting the same last sequence: %v, want a wrong-last-sequence refusal", err)
			}
			if _, _, err := l.deliver(ctx, other, 0, true); !wrongLastSeq(err) {
				t.Fatalf("another commit resent: %v, want a wrong-last-sequence refusal", err)
			}
			if h, err := l.Head(ctx); err != nil || h != 1 {
				t.Fatalf("Head = %d, %v; want 1", h, err)
			}
			if cs, err := l.Read(ctx, 0, 0); err != nil || len(cs) != 1 {
				t.Fatalf("Read = %d commits, %v; want 1", len(cs), err)
			}
		})
	}
}

// An Append whose earlier try was stored, its answer lost without a sign
// it may have landed, reads the aggregate again after the repeat is
// refused, finds its own commit last and publishes on top of it with the
// same Nats-Msg-Id: the stream answers a duplicate, at the first try's
// position, and the Append answers that commit's version — not the one
// it computed on top of it (found by the network-fault tests: an append
// through a lossy link acknowledged at version 81 and stored at 80).
func TestAppendAnsweredAsADuplicateGivesTheStoredVersion(t *testing.T) {
	nc, err := nats.Connect(natstest.RunServer(t).URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := Open(ctx, nc, Options{Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(ctx)

	req := eventlog.AppendRequest{AggregateType: "order", AggregateID: "o-1", ExpectedVersion: eventlog.AnyVersion,
		Events: []eventlog.Event{{Type: "Placed", Payload: []byte(`{}`)}}}
	if _, err := l.Append(ctx, req); err != nil {
		t.Fatal(err)
	}
	// The earlier try of the next commit: stored at version 2, position
	// 2, its acknowledgement thrown away.
	id := nuid.Next()
	c := eventlog.Commit{AggregateType: "order", AggregateID: "o-1", Version: 2, Time: time.Now().UTC(), Events: req.Events}
	subj := subjectOf(l.opts.Prefix, c.AggregateType, c.AggregateID)
	if _, err := nc.RequestMsg(commitMsg(l.opts.Stream, subj, id, eventlog.AppendCommit(nil, &c), 1), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	defer func(old func() string) { newMsgID = old }(newMsgID)
	newMsgID = func() string { return id }
	got, err := l.Append(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != 2 || got.Position != 2 {
		t.Errorf("Append answered version %d at position %d; the commit is stored at version 2, position 2", got.Version, got.Position)
	}
	if cs, err := l.Read(ctx, 0, 0); err != nil || len(cs) != 2 {
		t.Fatalf("Read = %d commits, %v; want 2", len(cs), err)
	}
}
