package jetstream_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/internal/testing/natstest"
)

// Two hosts — two logs on connections to different servers of an R3
// cluster — append to one aggregate at the same expected version, round
// after round: exactly one wins each round, the other gets
// ErrVersionConflict naming the versions.
func TestTwoHostsAppendAtOnce(t *testing.T) {
	c := natstest.RunCluster(t, 3)
	opts := optionsFor(t.Name(), 3)
	a := open(t, c.Nodes[0].URL(), opts)
	b := open(t, c.Nodes[1].URL(), opts)
	const rounds = 30
	for round := range int64(rounds) {
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, l := range []eventlog.Log{a, b} {
			wg.Go(func() { _, errs[i] = l.Append(context.Background(), req("order", "o-1", round)) })
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			switch {
			case err == nil:
				won++
			case errors.Is(err, eventlog.ErrVersionConflict):
				if !strings.Contains(err.Error(), "version") {
					t.Fatalf("round %d: conflict error %q does not name the versions", round, err)
				}
			default:
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if won != 1 {
			t.Fatalf("round %d: %d appends won, want 1 (errors %v)", round, won, errs)
		}
	}
	for _, l := range []eventlog.Log{a, b} {
		if v, err := l.Version(context.Background(), "order", "o-1"); err != nil || v != rounds {
			t.Fatalf("Version = %d, %v; want %d", v, err, rounds)
		}
	}
	checkLog(t, b, rounds)
}

// A Wait on one host wakes for an append of another host, and that host's
// commit is then readable on the first.
func TestWaitWokenByAnotherHost(t *testing.T) {
	for _, tc := range []struct {
		name     string
		replicas int
	}{{"single", 1}, {"R3", 3}} {
		t.Run(tc.name, func(t *testing.T) {
			var urlA, urlB string
			if tc.replicas == 1 {
				n := natstest.RunServer(t)
				urlA, urlB = n.URL(), n.URL()
			} else {
				c := natstest.RunCluster(t, 3)
				urlA, urlB = c.Nodes[0].URL(), c.Nodes[2].URL()
			}
			opts := optionsFor(t.Name(), tc.replicas)
			waiter, writer := open(t, urlA, opts), open(t, urlB, opts)
			for pos := uint64(1); pos <= 5; pos++ {
				woke := make(chan error, 1)
				go func() { woke <- waiter.Wait(context.Background(), pos-1) }()
				mustAppend(t, writer, req("order", "o-1", int64(pos-1)))
				select {
				case err := <-woke:
					if err != nil {
						t.Fatalf("Wait(%d): %v", pos-1, err)
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("Wait(%d) was not woken by the other host's append", pos-1)
				}
				cs, err := waiter.Read(context.Background(), pos, 10)
				if err != nil || len(cs) != 1 || cs[0].Position != pos {
					t.Fatalf("Read(%d) after the wake = %v, %v; want the commit at %d", pos, cs, err, pos)
				}
			}
		})
	}
}
