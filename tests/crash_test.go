package tests

import (
	"fmt"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"slices"
	"testing"
	"time"

	"github.com/berthhq/berth/wasm/abi"
)

// TestCrashRestart kills the host with SIGKILL while it is handling a backlog
// for a slow, sometimes failing service and while an aggregate is parked, then
// starts it again on the same data directory: every appended event is still
// in the log and handled at least once, each aggregate's versions reach the
// service in order, and the parked aggregate is still parked with its record
// and its held-back event, which a resume then delivers in order.
func TestCrashRestart(t *testing.T) {
	const orders, versions = 10, 5
	svc := newNotifier(t)
	h := newHost(t, hostConfig{NotifyURL: svc.URL(), Extra: fastRetry})
	h.uploadNotifier(t, 201)

	svc.set("ghost", behaviour{Unknown: true})
	h.appendShipped(t, "o-park", "ghost")
	before := h.waitParked(t, "o-park", 20*time.Second)
	h.appendShipped(t, "o-park", "ghost") // held back behind the parked v1

	for i := range orders {
		b := behaviour{Delay: 60 * time.Millisecond}
		if i%3 == 0 {
			b.Fail = 2 // two 503s along the way, retried
		}
		svc.set(fmt.Sprintf("b-%d", i), b)
	}
	for v := 1; v <= versions; v++ {
		for i := range orders {
			if got := h.appendShipped(t, fmt.Sprintf("c-%d", i), fmt.Sprintf("b-%d", i)); got != uint64(v) {
				t.Fatalf("c-%d: appended version %d, want %d", i, got, v)
			}
		}
	}
	successes := func() int {
		n := 0
		for _, c := range svc.callsOf("") {
			if c.Status < 300 {
				n++
			}
		}
		return n
	}
	checkfor.Within(t, 20*time.Second, func() error {
		if n := successes(); n < orders {
			return fmt.Errorf("%d notifications before the crash, want %d", n, orders)
		}
		return nil
	})
	h.Kill()
	svc.setEpoch(1)
	done := successes()
	if done >= orders*versions {
		t.Logf("every order was notified before the kill; the crash did not interrupt handling")
	}
	t.Logf("killed after %d of %d notifications", done, orders*versions)

	h2 := h.restart(t)

	// Nothing lost: the log holds every appended commit, and each is notified.
	for i := range orders {
		var out struct {
			Commits []struct {
				Version uint64 `json:"version"`
				OwnerID string `json:"ownerId"`
			} `json:"commits"`
		}
		h2.must(200, "GET", fmt.Sprintf("/v1/aggregates/Order/c-%d/events", i), nil).JSON(t, &out)
		if len(out.Commits) != versions || out.Commits[versions-1].Version != versions {
			t.Errorf("c-%d after the crash: %d commits %+v, want %d", i, len(out.Commits), out.Commits, versions)
		}
	}
	for i := range orders {
		for v := 1; v <= versions; v++ {
			svc.waitNotified(t, key(fmt.Sprintf("c-%d", i), v), 30*time.Second)
		}
	}

	// Nothing out of order: within each run of the host an aggregate's calls
	// never go back to an older version, each version succeeds at most once,
	// and the versions that succeed follow each other without a gap, the
	// second run taking up where the first left off or before.
	for i := range orders {
		order := fmt.Sprintf("c-%d", i)
		lastOK := 0 // the highest version notified so far, over both runs
		for epoch := range 2 {
			prev, prevOK := 0, 0
			for _, c := range svc.callsOf(fmt.Sprintf("b-%d", i)) {
				if c.Epoch != epoch {
					continue
				}
				p, err := abi.ParseInvocationKey(c.Key)
				if err != nil {
					t.Fatalf("key %q: %v", c.Key, err)
				}
				if p.Subscription != subName || p.AggregateType != "Order" || p.AggregateID != order || p.Index != 0 {
					t.Fatalf("%s: unexpected key %q", order, c.Key)
				}
				v := int(p.Version)
				if v < prev {
					t.Errorf("%s run %d: version %d arrived after version %d", order, epoch, v, prev)
				}
				prev = v
				if c.Status >= 300 {
					continue
				}
				switch {
				case prevOK == 0 && v > lastOK+1:
					t.Errorf("%s run %d: starts with version %d, but only %d was notified before", order, epoch, v, lastOK)
				case prevOK != 0 && v != prevOK+1:
					t.Errorf("%s run %d: version %d notified after %d", order, epoch, v, prevOK)
				}
				prevOK = v
				lastOK = max(lastOK, v)
			}
		}
	}

	// The parked aggregate is still parked, with its record; its second event waited.
	after := h2.waitParked(t, "o-park", 5*time.Second)
	if after.Version != before.Version || after.Attempts != before.Attempts || after.State != before.State ||
		!slices.Equal(after.Error.Classes, before.Error.Classes) || after.Error.Message != before.Error.Message {
		t.Errorf("o-park after the crash: %+v\nwant as before: %+v", after, before)
	}
	for _, c := range svc.callsOf("ghost") {
		if c.Key != key("o-park", 1) {
			t.Errorf("ghost: the held-back event was handled while parked: %+v", c)
		}
	}

	// Resume it: both of its events are notified, in order.
	svc.set("ghost", behaviour{})
	h2.must(202, "POST", "/v1/subscriptions/"+subName+"/parked/Order/o-park/resume", nil)
	svc.waitNotified(t, key("o-park", 2), 20*time.Second)
	var ok []string
	for _, c := range svc.callsOf("ghost") {
		if c.Status < 300 {
			ok = append(ok, c.Key)
		}
	}
	if !slices.Equal(ok, []string{key("o-park", 1), key("o-park", 2)}) {
		t.Errorf("ghost after resume: notified %v, want v1 then v2", ok)
	}
}
