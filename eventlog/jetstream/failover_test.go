package jetstream_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/internal/testing/natstest"
)

// appendEventually appends r, retrying while the cluster elects a new
// leader, and fails the test if it does not succeed within a while. A retry
// after an error that may have stored the commit (a lost acknowledgement)
// sees a conflict at the version it expected; that counts as stored.
func appendEventually(t *testing.T, l eventlog.Log, r eventlog.AppendRequest) {
	t.Helper()
	failed := false
	// The interval paces retries during an election; it proves nothing.
	checkfor.Nil(t, 60*time.Second, 100*time.Millisecond, func() error {
		_, err := l.Append(context.Background(), r)
		if err == nil || failed && errors.Is(err, eventlog.ErrVersionConflict) && isAt(l, r, r.ExpectedVersion+1) {
			return nil
		}
		failed = true
		return fmt.Errorf("append %s at %d: %w", r.AggregateID, r.ExpectedVersion, err)
	})
}

func isAt(l eventlog.Log, r eventlog.AppendRequest, version int64) bool {
	v, err := l.Version(context.Background(), r.AggregateType, r.AggregateID)
	return err == nil && v == uint64(version)
}

// The stream leader's server is shut down mid-test: appends and reads go on
// once the others elect a new leader; after the node comes back, the log is
// whole and gapless on every replica.
func TestClusterNodeShutdown(t *testing.T) {
	c := natstest.RunCluster(t, 3)
	opts := optionsFor(t.Name(), 3)
	l := open(t, c.URLs(), opts)
	const aggregates, each = 5, 4
	appendRound := func(round int) {
		for a := range aggregates {
			appendEventually(t, l, req("order", fmt.Sprint(a), int64(round)))
		}
	}
	for round := range each {
		appendRound(round)
	}
	var leader *natstest.Node
	for _, n := range c.Nodes {
		if n.Server().JetStreamIsStreamLeader("$G", opts.Stream) {
			leader = n
		}
	}
	if leader == nil {
		t.Fatal("no stream leader")
	}
	leader.Shutdown()
	c.WaitForMetaLeader(t)
	for round := each; round < 2*each; round++ {
		appendRound(round)
	}
	all := checkLog(t, l, aggregates*2*each)
	if v, err := l.Version(context.Background(), "order", "3"); err != nil || v != 2*each {
		t.Fatalf("Version after the failover = %d, %v", v, err)
	}
	if cs, err := l.ReadAggregate(context.Background(), "order", "2", 3, 0); err != nil || len(cs) != 2*each-2 {
		t.Fatalf("ReadAggregate after the failover = %d commits, %v", len(cs), err)
	}

	leader.Restart()
	c.WaitForMetaLeader(t)
	appendRound(2 * each)
	// A host connected to the restarted node alone reads the same log.
	other := open(t, leader.URL(), opts)
	if err := other.Wait(context.Background(), uint64(len(all))); err != nil {
		t.Fatal(err)
	}
	checkLog(t, other, aggregates*(2*each+1))
}
